// On the deterministic driver the engines run only at host scheduling points: the Win32
// event idiom (SetEventOnCompletion with an event, then WaitForSingleObject) still works, as
// the wait goes through the scheduler, and a wait nothing can satisfy ends at once with
// WAIT_TIMEOUT instead of hanging. Both on a device created with
// PIPEFENCE_DRIVER_DETERMINISTIC and inside an exploration.
#include <pipefence/d3d12.h>

#include "check.h"

using namespace pipefence::d3d12;

static HRESULT Body(ID3D12Device* device) {
    D3D12_COMMAND_QUEUE_DESC desc = {};
    desc.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
    ID3D12CommandQueue* queue = nullptr;
    CHECK_HR(device->CreateCommandQueue(&desc, &queue), S_OK);
    ID3D12Fence* a = nullptr;
    ID3D12Fence* b = nullptr;
    ID3D12Fence* never = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &a, "a"), S_OK);
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &b, "b"), S_OK);
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &never, "never"), S_OK);
    ID3D12GraphicsCommandList* list = nullptr;
    CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, nullptr, nullptr,
                                       &list),
             S_OK);
    list->Dispatch(SpinKernel(5000), 8);
    CHECK_HR(list->Close(), S_OK);
    ID3D12CommandList* lists[] = {list};
    CHECK_HR(queue->ExecuteCommandLists(1, lists), S_OK);
    CHECK_HR(queue->Signal(a, 1), S_OK);
    CHECK_HR(queue->ExecuteCommandLists(1, lists), S_OK);
    CHECK_HR(queue->Signal(b, 2), S_OK);

    HANDLE event = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    CHECK_HR(a->SetEventOnCompletion(1, event), S_OK);
    CHECK(WaitForSingleObject(event, INFINITE) == WAIT_OBJECT_0);
    CHECK(a->GetCompletedValue() == 1);

    ID3D12Fence* fences[] = {a, b};
    UINT64 values[] = {1, 2};
    CHECK_HR(device->SetEventOnMultipleFenceCompletion(fences, values, 2,
                                                       D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL, event),
             S_OK);
    CHECK(WaitForSingleObject(event, INFINITE) == WAIT_OBJECT_0);
    CHECK(b->GetCompletedValue() == 2);

    // Nothing will signal `never`: the wait ends at once.
    CHECK_HR(never->SetEventOnCompletion(1, event), S_OK);
    CHECK(WaitForSingleObject(event, INFINITE) == WAIT_TIMEOUT);
    CHECK_HR(device->GetDeviceRemovedReason(), S_OK);

    CloseHandle(event);
    list->Release();
    never->Release();
    b->Release();
    a->Release();
    queue->Release();
    return S_OK;
}

int main() {
    PIPEFENCE_DEVICE_DESC desc = {};
    desc.Driver = PIPEFENCE_DRIVER_DETERMINISTIC;
    desc.Seed = 7;
    ID3D12Device* device = nullptr;
    CHECK_HR(CreateDevice(&desc, &device), S_OK);
    CHECK_HR(Body(device), S_OK);
    device->Release();

    PIPEFENCE_EXPLORE_DESC explore = {};
    explore.Schedules = 10;
    ExploreResult result;
    CHECK_HR(Explore(&explore, Body, &result), S_OK);
    CHECK(result.Schedules == 10);
    CHECK(result.Failures.empty());
    printf("deterministic_events: ok\n");
    return 0;
}
