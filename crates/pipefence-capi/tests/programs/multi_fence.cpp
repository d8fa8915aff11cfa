// SetEventOnMultipleFenceCompletion with D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL and _ANY, set
// by CPU and queue signals; the null-HANDLE form blocks until done.
#include <pipefence/d3d12.h>

#include <thread>

#include "check.h"

using namespace pipefence::d3d12;

int main() {
    ID3D12Device* device = nullptr;
    CHECK_HR(CreateDevice(nullptr, &device), S_OK);
    ID3D12Fence* a = nullptr;
    ID3D12Fence* b = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &a, "a"), S_OK);
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &b, "b"), S_OK);
    D3D12_COMMAND_QUEUE_DESC queueDesc = {};
    queueDesc.Type = D3D12_COMMAND_LIST_TYPE_COPY;
    ID3D12CommandQueue* copy = nullptr;
    CHECK_HR(device->CreateCommandQueue(&queueDesc, &copy, "copy"), S_OK);
    ID3D12Fence* fences[] = {a, b};

    // ALL: one fence is not enough.
    HANDLE all = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    UINT64 values[] = {1, 2};
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(fences, values, 2,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL, all),
             S_OK);
    CHECK_HR(a->Signal(1), S_OK);
    CHECK(WaitForSingleObject(all, 50) == WAIT_TIMEOUT);
    CHECK_HR(copy->Signal(b, 2), S_OK);
    CHECK(WaitForSingleObject(all, 10000) == WAIT_OBJECT_0);
    // Auto-reset: consumed by the wait.
    CHECK(WaitForSingleObject(all, 0) == WAIT_TIMEOUT);

    // ANY: the first fence to get there.
    HANDLE any = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    UINT64 next[] = {10, 20};
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(fences, next, 2,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ANY, any),
             S_OK);
    CHECK(WaitForSingleObject(any, 50) == WAIT_TIMEOUT);
    CHECK_HR(copy->Signal(b, 20), S_OK);
    CHECK(WaitForSingleObject(any, 10000) == WAIT_OBJECT_0);
    CHECK(a->GetCompletedValue() == 1);

    // The null HANDLE blocks until all are reached (another thread signals).
    std::thread signaller([&] {
        a->Signal(30);
        copy->Signal(b, 30);
    });
    UINT64 last[] = {30, 30};
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(fences, last, 2,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL, nullptr),
             S_OK);
    signaller.join();
    CHECK(a->GetCompletedValue() == 30 && b->GetCompletedValue() == 30);

    // Manual reset events stay set; bad arguments.
    HANDLE manual = CreateEventW(nullptr, TRUE, FALSE, nullptr);
    CHECK_HR(a->SetEventOnCompletion(5, manual), S_OK);
    CHECK(WaitForSingleObject(manual, 10000) == WAIT_OBJECT_0);
    CHECK(WaitForSingleObject(manual, 0) == WAIT_OBJECT_0);
    CHECK(ResetEvent(manual) == TRUE);
    CHECK(WaitForSingleObject(manual, 0) == WAIT_TIMEOUT);
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(fences, last, 0,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL, any),
             E_INVALIDARG);
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(
                 fences, last, 2, static_cast<D3D12_MULTIPLE_FENCE_WAIT_FLAGS>(4), any),
             E_INVALIDARG);
    ID3D12Fence* withNull[] = {a, nullptr};
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(withNull, last, 2,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL, any),
             E_POINTER);
    // A fence of another device.
    ID3D12Device* device2 = nullptr;
    CHECK_HR(CreateDevice(nullptr, &device2), S_OK);
    ID3D12Fence* foreign = nullptr;
    CHECK_HR(device2->CreateFence(0, D3D12_FENCE_FLAG_NONE, &foreign), S_OK);
    ID3D12Fence* mixed[] = {a, foreign};
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(mixed, last, 2,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL, any),
             E_INVALIDARG);
    CHECK_HR(copy->Signal(foreign, 1), E_INVALIDARG);
    CHECK(WaitForSingleObject(nullptr, 0) == WAIT_FAILED);

    foreign->Release();
    device2->Release();
    CloseHandle(manual);
    CloseHandle(any);
    CloseHandle(all);
    copy->Release();
    b->Release();
    a->Release();
    device->Release();
    printf("multi_fence: ok\n");
    return 0;
}
