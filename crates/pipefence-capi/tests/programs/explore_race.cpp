// Exploration from C++: a racy submission (the compute queue sums a buffer the direct queue
// is still filling: the queue-side Wait was forgotten) fails under some deterministic
// schedules, the failing schedule replays exactly from its replay string, and the fixed
// submission passes every schedule. Then a host thread inside the schedule: a producer that
// signals before it writes, found the same way; and the hazard analysis (VALIDATE) reports
// the race without a result check.
#include <pipefence/d3d12.h>

#include <string>

#include "check.h"

using namespace pipefence::d3d12;

static const UINT kGroups = 16;
static const UINT64 kExpected = 5ull * 64 * kGroups;

// The submission under test. With `wait`, the compute queue waits for the direct queue.
static HRESULT Submit(ID3D12Device* device, bool wait, bool check) {
    ID3D12Resource* data = nullptr;
    ID3D12Resource* result = nullptr;
    if (FAILED(device->CreateBuffer(64 * 4 * kGroups, D3D12_HEAP_TYPE_DEFAULT, &data, "data")))
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
    fill->Dispatch(FillKernel(data->GetGPUVirtualAddress(), 5), kGroups);
    HRESULT hr = fill->Close();
    sum->Dispatch(SumKernel(result->GetGPUVirtualAddress(), data->GetGPUVirtualAddress()),
                  kGroups);
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
    if (SUCCEEDED(hr) && check && total != kExpected) hr = E_FAIL;

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

int main() {
    PIPEFENCE_EXPLORE_DESC desc = {};
    desc.FirstSeed = 0;
    desc.Schedules = 40;

    // The race is found.
    ExploreResult racy;
    CHECK_HR(Explore(&desc, [](ID3D12Device* d) { return Submit(d, false, true); }, &racy),
             S_OK);
    CHECK(racy.Schedules == 40);
    printf("racy submission: %zu of %llu schedules fail\n", racy.Failures.size(),
           (unsigned long long)racy.Schedules);
    CHECK(!racy.Failures.empty());
    const ScheduleFailure& first = racy.Failures[0];
    CHECK(first.Result == E_FAIL);
    CHECK(first.RemovedReason == S_OK);
    CHECK(first.Replay == "--driver deterministic --seed " + std::to_string(first.Seed));
    printf("  first: %s\n", first.Replay.c_str());

    // It replays exactly.
    ExploreResult again;
    CHECK_HR(ReplaySchedule(&desc, first.Replay.c_str(),
                            [](ID3D12Device* d) { return Submit(d, false, true); }, &again),
             S_OK);
    CHECK(again.Schedules == 1);
    CHECK(again.Failures.size() == 1 && again.Failures[0].Seed == first.Seed);
    CHECK(again.Failures[0].VirtualNs == first.VirtualNs);

    // The fix passes every schedule.
    ExploreResult fixed;
    CHECK_HR(Explore(&desc, [](ID3D12Device* d) { return Submit(d, true, true); }, &fixed), S_OK);
    CHECK(fixed.Schedules == 40);
    CHECK(fixed.Failures.empty());

    // The hazard analysis finds the race without looking at the result.
    PIPEFENCE_DEVICE_DESC validate = {};
    validate.MemoryModel = PIPEFENCE_MEMORY_MODEL_VALIDATE;
    PIPEFENCE_EXPLORE_DESC hazards = desc;
    hazards.Device = &validate;
    hazards.Schedules = 10;
    hazards.Flags = PIPEFENCE_EXPLORE_FLAG_FAIL_ON_HAZARD | PIPEFENCE_EXPLORE_FLAG_STOP_AT_FIRST_FAILURE;
    ExploreResult found;
    CHECK_HR(Explore(&hazards, [](ID3D12Device* d) { return Submit(d, false, false); }, &found),
             S_OK);
    CHECK(found.Failures.size() == 1);
    CHECK(found.Failures[0].Hazards > 0);
    CHECK(found.Failures[0].Result == S_OK);
    CHECK(found.Failures[0].Replay.find("--validate") != std::string::npos);
    printf("  hazard report:\n%s\n", found.Failures[0].Report.c_str());
    CHECK(!found.Failures[0].Report.empty());
    ExploreResult clean;
    CHECK_HR(Explore(&hazards, [](ID3D12Device* d) { return Submit(d, true, false); }, &clean),
             S_OK);
    CHECK(clean.Failures.empty());

    // A host thread in the schedule.
    ExploreResult early;
    CHECK_HR(Explore(&desc, [](ID3D12Device* d) { return Produce(d, true); }, &early), S_OK);
    printf("producer signalling early: %zu of %llu schedules fail\n", early.Failures.size(),
           (unsigned long long)early.Schedules);
    CHECK(!early.Failures.empty());
    ExploreResult inOrder;
    CHECK_HR(Explore(&desc, [](ID3D12Device* d) { return Produce(d, false); }, &inOrder), S_OK);
    CHECK(inOrder.Failures.empty());

    // An exception in the body is a failure, not a crash.
    PIPEFENCE_EXPLORE_DESC one = desc;
    one.Schedules = 2;
    ExploreResult thrown;
    CHECK_HR(Explore(&one, [](ID3D12Device*) -> HRESULT { throw 1; }, &thrown), S_OK);
    CHECK(thrown.Failures.size() == 2 && thrown.Failures[0].Result == E_FAIL);
    CHECK_HR(Explore(nullptr, [](ID3D12Device*) { return S_OK; }, &thrown), E_POINTER);
    CHECK_HR(ReplaySchedule(&desc, "not a replay", [](ID3D12Device*) { return S_OK; }, &thrown),
             E_INVALIDARG);
    printf("explore_race: ok\n");
    return 0;
}
