// A cross-queue memory-value handshake: the direct queue produces data and raises a 64-bit
// flag with Write64BitValueBottomOfPipeX (L2 writeback); the compute queue waits for it with
// Wait64BitValueX, doubles the data and answers on a second flag; the direct queue waits for
// the answer and copies the result to a readback buffer. Three rounds, the flags counting up.
#include <pipefence/d3d12.h>

#include "check.h"

using namespace pipefence::d3d12;

int main() {
    PIPEFENCE_DEVICE_DESC desc = {};
    desc.WatchdogTimeoutMs = 5000;
    ID3D12Device* device = nullptr;
    CHECK_HR(CreateDevice(&desc, &device), S_OK);

    ID3D12Resource* data = nullptr;
    ID3D12Resource* doubled = nullptr;
    ID3D12Resource* flags = nullptr;
    ID3D12Resource* readback = nullptr;
    CHECK_HR(device->CreateBuffer(4096, D3D12_HEAP_TYPE_DEFAULT, &data, "data"), S_OK);
    CHECK_HR(device->CreateBuffer(4096, D3D12_HEAP_TYPE_DEFAULT, &doubled, "doubled"), S_OK);
    CHECK_HR(device->CreateBuffer(256, D3D12_HEAP_TYPE_DEFAULT, &flags, "flags"), S_OK);
    CHECK_HR(device->CreateBuffer(4096 * 3, D3D12_HEAP_TYPE_READBACK, &readback, "readback"),
             S_OK);
    const D3D12_GPU_VIRTUAL_ADDRESS ready = flags->GetGPUVirtualAddress();
    const D3D12_GPU_VIRTUAL_ADDRESS answered = flags->GetGPUVirtualAddress() + 8;

    D3D12_COMMAND_QUEUE_DESC directDesc = {};
    directDesc.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
    D3D12_COMMAND_QUEUE_DESC computeDesc = {};
    computeDesc.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
    ID3D12CommandQueue* direct = nullptr;
    ID3D12CommandQueue* compute = nullptr;
    CHECK_HR(device->CreateCommandQueue(&directDesc, &direct, "direct"), S_OK);
    CHECK_HR(device->CreateCommandQueue(&computeDesc, &compute, "compute"), S_OK);
    ID3D12Fence* fence = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &fence, "frame"), S_OK);

    for (UINT round = 1; round <= 3; ++round) {
        ID3D12GraphicsCommandList* produce = nullptr;
        CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT, nullptr, nullptr,
                                           &produce),
                 S_OK);
        produce->Dispatch(FillKernel(data->GetGPUVirtualAddress(), round * 10), 16);
        produce->Write64BitValueBottomOfPipeX(ready, round,
                                              D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK,
                                              D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
        produce->Wait64BitValueX(answered, D3D12_COMPARISON_FUNC_GREATER_EQUAL, round,
                                 0xFFFFFFFFFFFFFFFFull, D3D12XBOX_WAIT_FLAG_NONE);
        produce->CopyBufferRegion(readback, 4096 * (round - 1), doubled, 0, 4096);
        CHECK_HR(produce->Close(), S_OK);

        ID3D12GraphicsCommandList* answer = nullptr;
        CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, nullptr, nullptr,
                                           &answer),
                 S_OK);
        answer->Wait64BitValueX(ready, D3D12_COMPARISON_FUNC_EQUAL, round, 0xFFFFFFFFFFFFFFFFull,
                                D3D12XBOX_WAIT_FLAG_NONE);
        answer->Dispatch(AddKernel(doubled->GetGPUVirtualAddress(), data->GetGPUVirtualAddress(),
                                   round * 10),
                         16);
        answer->Write64BitValueBottomOfPipeX(answered, round,
                                             D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK,
                                             D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
        CHECK_HR(answer->Close(), S_OK);

        // The consumer is submitted first: its wait holds until the producer's flag lands.
        ID3D12CommandList* a[] = {answer};
        ID3D12CommandList* p[] = {produce};
        CHECK_HR(compute->ExecuteCommandLists(1, a), S_OK);
        CHECK_HR(direct->ExecuteCommandLists(1, p), S_OK);
        CHECK_HR(direct->Signal(fence, round), S_OK);
        answer->Release();
        produce->Release();
    }
    CHECK_HR(fence->WaitX(3, 20000), S_OK);
    for (UINT round = 1; round <= 3; ++round) {
        for (UINT64 i = 0; i < 1024; i += 97) {
            UINT v = 0;
            CHECK_HR(readback->ReadU32(4096 * (round - 1) + 4 * i, &v), S_OK);
            CHECK(v == round * 20);
        }
    }
    CHECK_HR(device->GetDeviceRemovedReason(), S_OK);
    printf("handshake: 3 rounds ok\n");

    fence->Release();
    compute->Release();
    direct->Release();
    readback->Release();
    flags->Release();
    doubled->Release();
    data->Release();
    device->Release();
    return 0;
}
