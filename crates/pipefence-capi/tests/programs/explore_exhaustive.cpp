// Exhaustive exploration from C++ (PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE): every schedule of a
// program, not a sample of seeds; with PIPEFENCE_EXPLORE_FLAG_REDUCE (the threads share
// nothing but pipefence objects here) up to the order of independent actions. The racy submission
// (the compute queue sums a buffer the direct queue is still filling) fails in some schedule,
// which replays exactly from its schedule string; the fixed submission is proved: every
// schedule explored, none fails. Bounds say the exploration was not complete. A host thread
// inside the schedule is explored the same way.
#include <pipefence/d3d12.h>

#include <string>

#include "check.h"

using namespace pipefence::d3d12;

static const UINT kGroups = 2;
static const UINT64 kExpected = 5ull * 64 * kGroups;

// The submission under test. With `wait`, the compute queue waits for the direct queue.
static HRESULT Submit(ID3D12Device* device, bool wait) {
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
    if (SUCCEEDED(hr)) hr = done->SetEventOnCompletion(1, nullptr);
    UINT64 total = 0;
    if (SUCCEEDED(hr)) hr = result->ReadU64(0, &total);
    if (SUCCEEDED(hr) && total != kExpected) hr = E_FAIL;
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
    desc.Flags = PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE | PIPEFENCE_EXPLORE_FLAG_REDUCE;
    auto racy = [](ID3D12Device* d) { return Submit(d, false); };
    auto fixed = [](ID3D12Device* d) { return Submit(d, true); };

    // Every schedule of the racy submission: some fail.
    ExploreResult all;
    CHECK_HR(Explore(&desc, racy, &all), S_OK);
    printf("racy submission: %zu of %llu schedules fail, complete %d\n", all.Failures.size(),
           (unsigned long long)all.Schedules, (int)all.Complete);
    CHECK(all.Complete);
    CHECK(!all.Failures.empty() && all.Failures.size() < all.Schedules);
    const ScheduleFailure& first = all.Failures[0];
    CHECK(first.Result == E_FAIL);
    CHECK(first.Replay.rfind("v4:", 0) == 0);
    CHECK(first.Seed < all.Schedules);
    printf("  first: schedule %llu, %s\n", (unsigned long long)first.Seed, first.Replay.c_str());

    // Its schedule string replays it exactly.
    ExploreResult again;
    CHECK_HR(ReplaySchedule(&desc, first.Replay.c_str(), racy, &again), S_OK);
    CHECK(again.Schedules == 1 && !again.Complete);
    CHECK(again.Failures.size() == 1);
    CHECK(again.Failures[0].Replay == first.Replay);
    CHECK(again.Failures[0].VirtualNs == first.VirtualNs);
    // ... and the fixed submission passes that schedule's choices, or says they do not fit.
    ExploreResult other;
    HRESULT hr = ReplaySchedule(&desc, first.Replay.c_str(), fixed, &other);
    CHECK(hr == E_INVALIDARG || (hr == S_OK && other.Failures.empty()));

    // The fix is proved: every schedule explored, none fails.
    ExploreResult proved;
    CHECK_HR(Explore(&desc, fixed, &proved), S_OK);
    printf("fixed submission: %llu schedules, complete %d, %zu failing\n",
           (unsigned long long)proved.Schedules, (int)proved.Complete, proved.Failures.size());
    CHECK(proved.Complete && proved.Failures.empty() && proved.Schedules >= 1);

    // Bounds: fewer schedules than the search has, or the first failure, are not complete.
    PIPEFENCE_EXPLORE_DESC one = desc;
    one.Schedules = 1;
    ExploreResult bounded;
    CHECK_HR(Explore(&one, racy, &bounded), S_OK);
    CHECK(bounded.Schedules == 1 && !bounded.Complete);
    PIPEFENCE_EXPLORE_DESC stop = desc;
    stop.Flags |= PIPEFENCE_EXPLORE_FLAG_STOP_AT_FIRST_FAILURE;
    ExploreResult stopped;
    CHECK_HR(Explore(&stop, racy, &stopped), S_OK);
    CHECK(stopped.Failures.size() == 1 && !stopped.Complete);
    CHECK(stopped.Failures[0].Replay == first.Replay);

    // Without reduction every interleaving counts: more schedules, the same verdicts.
    PIPEFENCE_EXPLORE_DESC plain = desc;
    plain.Flags = PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE;
    plain.Schedules = 3000;
    ExploreResult every;
    CHECK_HR(Explore(&plain, racy, &every), S_OK);
    printf("racy submission without reduction: %zu of %llu schedules fail, complete %d\n",
           every.Failures.size(), (unsigned long long)every.Schedules, (int)every.Complete);
    CHECK(every.Schedules > all.Schedules && !every.Failures.empty());
    CHECK(every.Failures[0].Replay.rfind("v3:", 0) == 0);
    ExploreResult provedPlain;
    CHECK_HR(Explore(&plain, fixed, &provedPlain), S_OK);
    printf("fixed submission without reduction: %llu schedules, complete %d, %zu failing\n",
           (unsigned long long)provedPlain.Schedules, (int)provedPlain.Complete,
           provedPlain.Failures.size());
    CHECK(provedPlain.Failures.empty());

    // A host thread in the schedule.
    ExploreResult early;
    CHECK_HR(Explore(&desc, [](ID3D12Device* d) { return Produce(d, true); }, &early), S_OK);
    printf("producer signalling early: %zu of %llu schedules fail, complete %d\n",
           early.Failures.size(), (unsigned long long)early.Schedules, (int)early.Complete);
    CHECK(early.Complete && !early.Failures.empty());
    ExploreResult inOrder;
    CHECK_HR(Explore(&desc, [](ID3D12Device* d) { return Produce(d, false); }, &inOrder), S_OK);
    CHECK(inOrder.Complete && inOrder.Failures.empty());

    // Bad input.
    CHECK_HR(ReplaySchedule(&desc, "v4:!!", racy, &other), E_INVALIDARG);
    PIPEFENCE_EXPLORE_DESC noSeeds = {};
    noSeeds.Flags = PIPEFENCE_EXPLORE_FLAG_REDUCE;
    CHECK_HR(Explore(&noSeeds, racy, &other), E_INVALIDARG);
    printf("explore_exhaustive: ok\n");
    return 0;
}
