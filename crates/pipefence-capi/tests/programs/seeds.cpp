// The seeds' calls as the reference pages spell them: ID3D12CommandQueue::Wait(pFence,
// Value), Wait32BitValueX(Address, ComparisonFunction, ReferenceValue, MaskValue, Flags),
// Write64BitValueBottomOfPipeX(Destination, Value, Flush, Flags) with each flush flag, and
// the CPU side (GetCompletedValue, SetEventOnCompletion + WaitForSingleObject).
#include <pipefence/d3d12.h>

#include <cstring>
#include <string>

#include "check.h"

using namespace pipefence::d3d12;

static ID3D12GraphicsCommandList* NewList(ID3D12Device* device, D3D12_COMMAND_LIST_TYPE type) {
    ID3D12CommandAllocator* allocator = nullptr;
    CHECK_HR(device->CreateCommandAllocator(type, &allocator), S_OK);
    ID3D12GraphicsCommandList* list = nullptr;
    CHECK_HR(device->CreateCommandList(0, type, allocator, nullptr, &list), S_OK);
    allocator->Release();
    return list;
}

int main() {
    ID3D12Device* device = nullptr;
    CHECK_HR(CreateDevice(nullptr, &device), S_OK);

    D3D12_COMMAND_QUEUE_DESC queueDesc = {};
    queueDesc.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
    queueDesc.Flags = D3D12_COMMAND_QUEUE_FLAG_NONE;
    ID3D12CommandQueue* queue = nullptr;
    CHECK_HR(device->CreateCommandQueue(&queueDesc, &queue), S_OK);

    ID3D12Fence* pFence = nullptr;
    ID3D12Fence* done = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &pFence), S_OK);
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &done), S_OK);
    CHECK(pFence->GetCompletedValue() == 0);

    ID3D12Resource* flags = nullptr;
    CHECK_HR(device->CreateBuffer(256, D3D12_HEAP_TYPE_PIPEFENCE_SHARED, &flags), S_OK);
    D3D12_GPU_VIRTUAL_ADDRESS Address = flags->GetGPUVirtualAddress();
    CHECK(Address != 0 && Address % 256 == 0);

    // Wait32BitValueX on the micro engine, then a queue-side Wait whose ticket is issued now:
    // the CPU signals 1 and lowers the fence to 0 again before the queue gets there, and the
    // wait is still satisfied (a queue wait is a ticket, not a poll).
    ID3D12GraphicsCommandList* list = NewList(device, D3D12_COMMAND_LIST_TYPE_DIRECT);
    D3D12_COMPARISON_FUNC ComparisonFunction = D3D12_COMPARISON_FUNC_EQUAL;
    UINT ReferenceValue = 1;
    UINT MaskValue = 0xFFFFFFFF;
    list->Wait32BitValueX(Address, ComparisonFunction, ReferenceValue, MaskValue,
                          D3D12XBOX_WAIT_FLAG_NONE);
    CHECK_HR(list->Close(), S_OK);
    ID3D12CommandList* lists[] = {list};
    queue->ExecuteCommandLists(1, lists);
    UINT64 Value = 1;
    CHECK_HR(queue->Wait(pFence, Value), S_OK);
    CHECK_HR(queue->Signal(done, 1), S_OK);
    CHECK_HR(pFence->Signal(1), S_OK);
    CHECK_HR(pFence->Signal(0), S_OK);
    CHECK(done->GetCompletedValue() == 0);
    CHECK_HR(flags->WriteU32(0, 1), S_OK);
    HANDLE event = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    CHECK(event != nullptr);
    CHECK_HR(done->SetEventOnCompletion(1, event), S_OK);
    CHECK(WaitForSingleObject(event, 10000) == WAIT_OBJECT_0);
    CHECK(done->GetCompletedValue() == 1);
    CHECK(pFence->GetCompletedValue() == 0);

    // The PFP form (GREATER_EQUAL), and Write64BitValueBottomOfPipeX with every flush flag
    // the page lists.
    ID3D12GraphicsCommandList* writes = NewList(device, D3D12_COMMAND_LIST_TYPE_DIRECT);
    writes->Wait32BitValueX(Address, D3D12_COMPARISON_FUNC_GREATER_EQUAL, 1, 0xFFFFFFFF,
                            D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP);
    const D3D12XBOX_FLUSH flushes[] = {
        D3D12XBOX_FLUSH_BOP_TEXTURE_L1_INVALIDATE, D3D12XBOX_FLUSH_BOP_TEXTURE_L1_VOLATILE,
        D3D12XBOX_FLUSH_BOP_TEXTURE_L2_INVALIDATE, D3D12XBOX_FLUSH_BOP_TEXTURE_L2_VOLATILE,
        D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK,  D3D12XBOX_FLUSH_NONE,
    };
    for (UINT i = 0; i < 6; ++i) {
        writes->Write64BitValueBottomOfPipeX(Address + 8 + 8 * i, 100 + i, flushes[i],
                                             D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
    }
    writes->Write64BitValueBottomOfPipeX(
        Address + 64, 7,
        D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK | D3D12XBOX_FLUSH_BOP_TEXTURE_L1_INVALIDATE,
        D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
    writes->Write64BitValueBottomOfPipeX(Address + 72, 0, D3D12XBOX_FLUSH_NONE,
                                         D3D12XBOX_WRITE_VALUE_BOP_FLAG_GPU_TIMESTAMP);
    writes->Write32BitValueBottomOfPipeX(Address + 80, 9, D3D12XBOX_FLUSH_NONE,
                                         D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
    writes->Write64BitValueTopOfPipeX(Address + 88, 11, D3D12XBOX_WRITE_VALUE_TOP_FLAG_NONE);
    writes->Write32BitValueTopOfPipeX(Address + 96, 12);
    writes->Wait64BitValueX(Address + 64, D3D12_COMPARISON_FUNC_GREATER_EQUAL, 7,
                            0xFFFFFFFFFFFFFFFFull, D3D12XBOX_WAIT_FLAG_NONE);
    CHECK_HR(writes->Close(), S_OK);
    ID3D12CommandList* writeLists[] = {writes};
    CHECK_HR(queue->ExecuteCommandLists(1, writeLists), S_OK);
    CHECK_HR(queue->Signal(done, 2), S_OK);
    CHECK_HR(done->SetEventOnCompletion(2, nullptr), S_OK);  // a null HANDLE blocks
    CHECK(done->GetCompletedValue() == 2);
    for (UINT i = 0; i < 6; ++i) {
        UINT64 v = 0;
        CHECK_HR(flags->ReadU64(8 + 8 * i, &v), S_OK);
        CHECK(v == 100 + i);
    }
    UINT64 timestamp = 0;
    CHECK_HR(flags->ReadU64(72, &timestamp), S_OK);
    CHECK(timestamp > 0);
    UINT v32 = 0;
    CHECK_HR(flags->ReadU32(80, &v32), S_OK);
    CHECK(v32 == 9);
    UINT64 top = 0;
    CHECK_HR(flags->ReadU64(88, &top), S_OK);
    CHECK(top == 11);
    UINT64 frequency = 0;
    CHECK_HR(queue->GetTimestampFrequency(&frequency), S_OK);
    CHECK(frequency == 100000000);

    // Deferred validation: recording never fails, Close names the first invalid command.
    ID3D12GraphicsCommandList* bad = NewList(device, D3D12_COMMAND_LIST_TYPE_COMPUTE);
    bad->Wait32BitValueX(Address, D3D12_COMPARISON_FUNC_EQUAL, 1, 0xFFFFFFFF,
                         D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP);
    CHECK_HR(bad->Close(), E_INVALIDARG);
    std::string message = GetLastErrorMessage();
    CHECK(message.find("command 0") != std::string::npos);
    CHECK_HR(bad->Reset(nullptr, nullptr), S_OK);
    bad->Wait64BitValueX(Address + 4, D3D12_COMPARISON_FUNC_GREATER_EQUAL, 1, ~0ull,
                         D3D12XBOX_WAIT_FLAG_NONE);
    CHECK_HR(bad->Close(), E_INVALIDARG);
    CHECK(GetLastErrorMessage().find("align") != std::string::npos);
    CHECK_HR(bad->Reset(nullptr, nullptr), S_OK);
    bad->Write64BitValueBottomOfPipeX(Address + 8, 5, D3D12XBOX_FLUSH_NONE,
                                      D3D12XBOX_WRITE_VALUE_BOP_FLAG_GPU_TIMESTAMP);
    CHECK_HR(bad->Close(), E_INVALIDARG);
    CHECK_HR(bad->Reset(nullptr, nullptr), S_OK);
    bad->Wait32BitValueX(Address, static_cast<D3D12_COMPARISON_FUNC>(42), 1, 1,
                         D3D12XBOX_WAIT_FLAG_NONE);
    CHECK_HR(bad->Close(), E_INVALIDARG);
    CHECK(GetLastErrorMessage().find("42") != std::string::npos);
    CHECK_HR(bad->Reset(nullptr, nullptr), S_OK);
    bad->CopyBufferRegion(nullptr, 0, flags, 0, 4);  // a null buffer is reported by Close
    CHECK_HR(bad->Close(), E_INVALIDARG);
    CHECK(GetLastErrorMessage().find("null") != std::string::npos);
    CHECK_HR(bad->Reset(nullptr, nullptr), S_OK);
    CHECK_HR(bad->Close(), S_OK);
    CHECK_HR(bad->Close(), DXGI_ERROR_INVALID_CALL);
    // A list of another type, an open list, a null list.
    ID3D12CommandList* wrongType[] = {bad};
    CHECK_HR(queue->ExecuteCommandLists(1, wrongType), E_INVALIDARG);
    ID3D12GraphicsCommandList* open = NewList(device, D3D12_COMMAND_LIST_TYPE_DIRECT);
    ID3D12CommandList* openLists[] = {open};
    CHECK_HR(queue->ExecuteCommandLists(1, openLists), DXGI_ERROR_INVALID_CALL);
    ID3D12CommandList* nullLists[] = {nullptr};
    CHECK_HR(queue->ExecuteCommandLists(1, nullLists), E_POINTER);
    CHECK_HR(queue->Wait(nullptr, 1), E_POINTER);

    // CPU access follows the heap rules.
    ID3D12Resource* local = nullptr;
    CHECK_HR(device->CreateBuffer(64, D3D12_HEAP_TYPE_DEFAULT, &local), S_OK);
    CHECK_HR(local->ReadU32(0, &v32), DXGI_ERROR_INVALID_CALL);
    local->Release();
    CHECK_HR(flags->ReadU32(2, &v32), E_INVALIDARG);
    CHECK_HR(flags->ReadU32(256, &v32), E_INVALIDARG);
    CHECK_HR(device->CreateBuffer(6, D3D12_HEAP_TYPE_DEFAULT, &local), E_INVALIDARG);
    CHECK(local == nullptr);

    CHECK_HR(device->GetDeviceRemovedReason(), S_OK);
    CHECK(device->GetRemovalReportText().empty());
    CHECK(CloseHandle(event) == TRUE);
    CHECK(CloseHandle(event) == FALSE);

    open->Release();
    bad->Release();
    writes->Release();
    list->Release();
    flags->Release();
    done->Release();
    pFence->Release();
    queue->Release();
    CHECK(device->AddRef() == 2);
    CHECK(device->Release() == 1);
    CHECK(device->Release() == 0);
    printf("seeds: ok\n");
    return 0;
}
