// Exploration from C++: a racy submission (the compute queue sums a buffer the direct queue
// is still filling: the queue-side Wait was forgotten) fails under some deterministic
// schedules, the failing schedule replays exactly from its replay string, and the fixed
// submission passes every schedule. Then a host thread inside the schedule: a producer that
// signals before it writes, found the same way; and the hazard analysis (VALIDATE) reports
// the race without a result check.
#include <string>

#include "racy.h"

static const UINT kGroups = 16;

static HRESULT Racy(ID3D12Device* d) { return Submit(d, kGroups, false, true); }
static HRESULT Fixed(ID3D12Device* d) { return Submit(d, kGroups, true, true); }
static HRESULT RacyUnchecked(ID3D12Device* d) { return Submit(d, kGroups, false, false); }
static HRESULT FixedUnchecked(ID3D12Device* d) { return Submit(d, kGroups, true, false); }

int main() {
    PIPEFENCE_EXPLORE_DESC desc = {};
    desc.FirstSeed = 0;
    desc.Schedules = 40;

    // The race is found.
    ExploreResult racy;
    CHECK_HR(Explore(&desc, Racy, &racy), S_OK);
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
    CHECK_HR(ReplaySchedule(&desc, first.Replay.c_str(), Racy, &again), S_OK);
    CHECK(again.Schedules == 1);
    CHECK(again.Failures.size() == 1 && again.Failures[0].Seed == first.Seed);
    CHECK(again.Failures[0].VirtualNs == first.VirtualNs);

    // The fix passes every schedule.
    ExploreResult fixed;
    CHECK_HR(Explore(&desc, Fixed, &fixed), S_OK);
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
    CHECK_HR(Explore(&hazards, RacyUnchecked, &found), S_OK);
    CHECK(found.Failures.size() == 1);
    CHECK(found.Failures[0].Hazards > 0);
    CHECK(found.Failures[0].Result == S_OK);
    CHECK(found.Failures[0].Replay.find("--validate") != std::string::npos);
    printf("  hazard report:\n%s\n", found.Failures[0].Report.c_str());
    CHECK(!found.Failures[0].Report.empty());
    ExploreResult clean;
    CHECK_HR(Explore(&hazards, FixedUnchecked, &clean), S_OK);
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
