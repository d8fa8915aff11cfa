// D3D12 sample-style code compiles as written: ComPtr, IID_PPV_ARGS, _countof, a command
// allocator, Dispatch(x, y, z) with no kernel set (empty shaders), and the classic
// WaitForPreviousFrame (Signal, GetCompletedValue, SetEventOnCompletion, WaitForSingleObject).
#include <pipefence/d3d12.h>

#include "check.h"

using namespace pipefence::d3d12;

int main() {
    ComPtr<ID3D12Device> device;
    CHECK_HR(CreateDevice(nullptr, &device), S_OK);

    D3D12_COMMAND_QUEUE_DESC queueDesc = {};
    queueDesc.Flags = D3D12_COMMAND_QUEUE_FLAG_NONE;
    queueDesc.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
    ComPtr<ID3D12CommandQueue> commandQueue;
    CHECK_HR(device->CreateCommandQueue(&queueDesc, IID_PPV_ARGS(&commandQueue)), S_OK);
    CHECK(commandQueue->GetDesc().Type == D3D12_COMMAND_LIST_TYPE_DIRECT);

    ComPtr<ID3D12CommandAllocator> commandAllocator;
    CHECK_HR(device->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_DIRECT,
                                            IID_PPV_ARGS(&commandAllocator)),
             S_OK);
    ComPtr<ID3D12GraphicsCommandList> commandList;
    CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT, commandAllocator.Get(),
                                       nullptr, IID_PPV_ARGS(&commandList)),
             S_OK);
    CHECK_HR(commandList->Close(), S_OK);

    ComPtr<ID3D12Fence> fence;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, IID_PPV_ARGS(&fence)), S_OK);
    UINT64 fenceValue = 1;
    HANDLE fenceEvent = CreateEvent(nullptr, FALSE, FALSE, nullptr);
    CHECK(fenceEvent != nullptr);

    for (int frame = 0; frame < 3; ++frame) {
        CHECK_HR(commandAllocator->Reset(), S_OK);
        CHECK_HR(commandList->Reset(commandAllocator.Get(), nullptr), S_OK);
        commandList->SetMarker(0, L"frame", sizeof(L"frame"));
        commandList->Dispatch(4, 2, 1);
        CHECK_HR(commandList->Close(), S_OK);
        ID3D12CommandList* ppCommandLists[] = {commandList.Get()};
        commandQueue->ExecuteCommandLists(_countof(ppCommandLists), ppCommandLists);

        // WaitForPreviousFrame.
        const UINT64 currentFence = fenceValue;
        CHECK_HR(commandQueue->Signal(fence.Get(), currentFence), S_OK);
        fenceValue++;
        if (fence->GetCompletedValue() < currentFence) {
            CHECK_HR(fence->SetEventOnCompletion(currentFence, fenceEvent), S_OK);
            WaitForSingleObject(fenceEvent, INFINITE);
        }
        CHECK(fence->GetCompletedValue() == currentFence);
    }
    // A shader of your own: each group writes its id and counts itself.
    ComPtr<ID3D12Resource> out;
    CHECK_HR(device->CreateBuffer(256, D3D12_HEAP_TYPE_READBACK, IID_PPV_ARGS(&out)), S_OK);
    const D3D12_GPU_VIRTUAL_ADDRESS base = out->GetGPUVirtualAddress();
    auto shader = [base](KernelContext& k) {
        k.WriteU32(base + 8 + 4 * k.Group(), k.Group() * 3);
        k.AtomicAddU64(base, 1);
    };
    CHECK_HR(commandList->Reset(commandAllocator.Get(), nullptr), S_OK);
    commandList->SetKernelX(ShaderKernel(&shader));
    commandList->Dispatch(8, 1, 1);
    CHECK_HR(commandList->Close(), S_OK);
    ID3D12CommandList* shaderLists[] = {commandList.Get()};
    commandQueue->ExecuteCommandLists(_countof(shaderLists), shaderLists);
    CHECK_HR(commandQueue->Signal(fence.Get(), fenceValue), S_OK);
    CHECK_HR(fence->WaitX(fenceValue, 10000), S_OK);
    UINT64 groups = 0;
    CHECK_HR(out->ReadU64(0, &groups), S_OK);
    CHECK(groups == 8);
    for (UINT g = 0; g < 8; ++g) {
        UINT v = 0;
        CHECK_HR(out->ReadU32(8 + 4 * g, &v), S_OK);
        CHECK(v == g * 3);
    }
    CHECK(CloseHandle(fenceEvent));
    CHECK_HR(device->GetDeviceRemovedReason(), S_OK);
    CHECK(device->GetRemovalReport().empty());

    // Copies keep a reference; Reset releases it.
    ComPtr<ID3D12Fence> copy = fence;
    CHECK(copy.Get() == fence.Get());
    CHECK(copy.Reset() == 1);
    printf("d3d12_idioms: ok\n");
    return 0;
}
