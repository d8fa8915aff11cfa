/* The programs the exploration tests run: a racy submission (the compute queue sums a buffer
 * the direct queue may still be filling) and a host thread that produces a value for the GPU. */
#ifndef PIPEFENCE_TEST_RACY_H
#define PIPEFENCE_TEST_RACY_H
#include <pipefence/d3d12.h>

#include "check.h"

using namespace pipefence::d3d12;

// The submission under test: the direct queue fills `groups` groups of 64 words with 5, the
// compute queue sums them. With `wait`, the compute queue waits for the direct queue; with
// `check`, a wrong sum is a failure (E_FAIL).
static HRESULT Submit(ID3D12Device* device, UINT groups, bool wait, bool check) {
    const UINT64 expected = 5ull * 64 * groups;
    ID3D12Resource* data = nullptr;
    ID3D12Resource* result = nullptr;
    if (FAILED(device->CreateBuffer(64 * 4 * groups, D3D12_HEAP_TYPE_DEFAULT, &data, "data")))
        return E_FAIL;
    if (FAILED(device->CreateBuffer(64, D3D12_HEAP_TYPE_READBACK, &result, "result")))
        return E_FAIL;
    ID3D12Fence* ready = nullptr;
    ID3D12Fence* done = nullptr;
    device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &ready, "ready");
    device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &done, "done");
    D3D12_COMMAND_QUEUE_DESC d = {D3D12_COMMAND_LIST_TYPE_DIRECT, 0,
                                  D3D12_COMMAND_QUEUE_FLAG_NONE, 0};
    D3D12_COMMAND_QUEUE_DESC c = {D3D12_COMMAND_LIST_TYPE_COMPUTE, 0,
                                  D3D12_COMMAND_QUEUE_FLAG_NONE, 0};
    ID3D12CommandQueue* gfx = nullptr;
    ID3D12CommandQueue* async = nullptr;
    device->CreateCommandQueue(&d, &gfx, "gfx");
    device->CreateCommandQueue(&c, &async, "async");

    ID3D12GraphicsCommandList* fill = nullptr;
    ID3D12GraphicsCommandList* sum = nullptr;
    device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT, nullptr, nullptr, &fill,
                              "fill");
    device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, nullptr, nullptr, &sum, "sum");
    fill->Dispatch(FillKernel(data->GetGPUVirtualAddress(), 5), groups);
    HRESULT hr = fill->Close();
    sum->Dispatch(SumKernel(result->GetGPUVirtualAddress(), data->GetGPUVirtualAddress()),
                  groups);
    if (SUCCEEDED(hr)) hr = sum->Close();

    ID3D12CommandList* f[] = {fill};
    ID3D12CommandList* s[] = {sum};
    if (SUCCEEDED(hr)) hr = gfx->ExecuteCommandLists(1, f);
    if (SUCCEEDED(hr)) hr = gfx->Signal(ready, 1);
    if (SUCCEEDED(hr) && wait) hr = async->Wait(ready, 1);
    if (SUCCEEDED(hr)) hr = async->ExecuteCommandLists(1, s);
    if (SUCCEEDED(hr)) hr = async->Signal(done, 1);
    // A null HANDLE: the wait is a scheduling point of the deterministic driver.
    if (SUCCEEDED(hr)) hr = done->SetEventOnCompletion(1, nullptr);
    UINT64 total = 0;
    if (SUCCEEDED(hr)) hr = result->ReadU64(0, &total);
    if (SUCCEEDED(hr) && check && total != expected) hr = E_FAIL;

    sum->Release();
    fill->Release();
    async->Release();
    gfx->Release();
    done->Release();
    ready->Release();
    result->Release();
    data->Release();
    return hr;
}

// A host thread writes a value and signals a fence; the GPU waits for the fence and copies
// the value. With `early`, the producer signals before it writes (the bug).
static HRESULT Produce(ID3D12Device* device, bool early) {
    ID3D12Resource* upload = nullptr;
    ID3D12Resource* readback = nullptr;
    device->CreateBuffer(64, D3D12_HEAP_TYPE_UPLOAD, &upload, "upload");
    device->CreateBuffer(64, D3D12_HEAP_TYPE_READBACK, &readback, "readback");
    ID3D12Fence* go = nullptr;
    ID3D12Fence* done = nullptr;
    device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &go, "go");
    device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &done, "done");
    D3D12_COMMAND_QUEUE_DESC c = {D3D12_COMMAND_LIST_TYPE_COPY, 0,
                                  D3D12_COMMAND_QUEUE_FLAG_NONE, 0};
    ID3D12CommandQueue* copy = nullptr;
    device->CreateCommandQueue(&c, &copy, "copy");
    ID3D12GraphicsCommandList* list = nullptr;
    device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COPY, nullptr, nullptr, &list, "copy");
    list->CopyBufferRegion(readback, 0, upload, 0, 4);
    HRESULT hr = list->Close();
    ID3D12CommandList* l[] = {list};
    if (SUCCEEDED(hr)) hr = copy->Wait(go, 1);
    if (SUCCEEDED(hr)) hr = copy->ExecuteCommandLists(1, l);
    if (SUCCEEDED(hr)) hr = copy->Signal(done, 1);

    HostThread* producer = nullptr;
    if (SUCCEEDED(hr)) {
        hr = CreateHostThread(device, "producer", [=]() -> HRESULT {
            if (early) go->Signal(1);
            HRESULT r = upload->WriteU32(0, 42);
            if (!early) go->Signal(1);
            return r;
        }, &producer);
    }
    if (SUCCEEDED(hr)) hr = done->SetEventOnCompletion(1, nullptr);
    UINT value = 0;
    if (SUCCEEDED(hr)) hr = readback->ReadU32(0, &value);
    if (producer != nullptr) {
        HRESULT joined = E_FAIL;
        CHECK_HR(producer->Join(&joined), S_OK);
        CHECK_HR(joined, S_OK);
        CHECK_HR(producer->Join(), DXGI_ERROR_INVALID_CALL);
        producer->Release();
    }
    if (SUCCEEDED(hr) && value != 42) hr = E_FAIL;

    list->Release();
    copy->Release();
    done->Release();
    go->Release();
    readback->Release();
    upload->Release();
    return hr;
}

#endif
