// examples/async-compute.kdl in C++: the graphics queue fills a buffer and raises a flag
// with a bottom-of-pipe write (L2 writeback, so the data is visible before the flag); the
// async compute queue waits for the flag on its pre-fetch parser, then sums the buffer; the
// host waits for the compute queue's fence and checks the result.
#include <pipefence/d3d12.h>

#include "check.h"

using namespace pipefence::d3d12;

int main() {
    PIPEFENCE_DEVICE_DESC desc = {};
    desc.WatchdogTimeoutMs = 2000;
    ID3D12Device* device = nullptr;
    CHECK_HR(CreateDevice(&desc, &device), S_OK);

    ID3D12Resource* data = nullptr;
    ID3D12Resource* flags = nullptr;
    CHECK_HR(device->CreateBuffer(16384, D3D12_HEAP_TYPE_DEFAULT, &data, "data"), S_OK);
    CHECK_HR(device->CreateBuffer(64, D3D12_HEAP_TYPE_PIPEFENCE_SHARED, &flags, "flags"), S_OK);
    ID3D12Fence* done = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &done, "done"), S_OK);

    D3D12_COMMAND_QUEUE_DESC gfxDesc = {D3D12_COMMAND_LIST_TYPE_DIRECT, 0,
                                        D3D12_COMMAND_QUEUE_FLAG_NONE, 0};
    D3D12_COMMAND_QUEUE_DESC asyncDesc = {D3D12_COMMAND_LIST_TYPE_COMPUTE, 0,
                                          D3D12_COMMAND_QUEUE_FLAG_NONE, 0};
    ID3D12CommandQueue* gfx = nullptr;
    ID3D12CommandQueue* async = nullptr;
    CHECK_HR(device->CreateCommandQueue(&gfxDesc, &gfx, "gfx"), S_OK);
    CHECK_HR(device->CreateCommandQueue(&asyncDesc, &async, "async"), S_OK);

    ID3D12GraphicsCommandList* produce = nullptr;
    CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT, nullptr, nullptr,
                                       &produce, "produce"),
             S_OK);
    produce->BeginEvent("fill");
    produce->SetKernelX(FillKernel(data->GetGPUVirtualAddress(), 7));
    produce->Dispatch(64, 1, 1);
    produce->EndEvent();
    produce->Write64BitValueBottomOfPipeX(flags->GetGPUVirtualAddress(), 1,
                                          D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK,
                                          D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
    CHECK_HR(produce->Close(), S_OK);

    ID3D12GraphicsCommandList* consume = nullptr;
    CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, nullptr, nullptr,
                                       &consume, "consume"),
             S_OK);
    consume->Wait64BitValueX(flags->GetGPUVirtualAddress(), D3D12_COMPARISON_FUNC_GREATER_EQUAL,
                             1, 0xFFFFFFFFFFFFFFFFull, D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP);
    consume->Dispatch(SumKernel(flags->GetGPUVirtualAddress() + 8, data->GetGPUVirtualAddress()),
                      64);
    CHECK_HR(consume->Close(), S_OK);

    ID3D12CommandList* gfxLists[] = {produce};
    ID3D12CommandList* asyncLists[] = {consume};
    CHECK_HR(gfx->ExecuteCommandLists(1, gfxLists), S_OK);
    CHECK_HR(async->ExecuteCommandLists(1, asyncLists), S_OK);
    CHECK_HR(async->Signal(done, 1), S_OK);

    HANDLE event = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    CHECK_HR(done->SetEventOnCompletion(1, event), S_OK);
    CHECK(WaitForSingleObject(event, 5000) == WAIT_OBJECT_0);

    UINT64 sum = 0;
    CHECK_HR(flags->ReadU64(8, &sum), S_OK);
    printf("sum = %llu (expected 28672), fence done = %llu\n", (unsigned long long)sum,
           (unsigned long long)done->GetCompletedValue());
    CHECK(sum == 28672);
    CHECK(done->GetCompletedValue() == 1);
    CHECK_HR(device->GetDeviceRemovedReason(), S_OK);

    CloseHandle(event);
    consume->Release();
    produce->Release();
    async->Release();
    gfx->Release();
    done->Release();
    flags->Release();
    data->Release();
    device->Release();
    return 0;
}
