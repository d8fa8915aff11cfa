// Exhaustive exploration from C++ (PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE): every schedule of a
// program, not a sample of seeds; with PIPEFENCE_EXPLORE_FLAG_REDUCE (the threads share
// nothing but pipefence objects here) up to the order of independent actions. The racy submission
// (the compute queue sums a buffer the direct queue is still filling) fails in some schedule,
// which replays exactly from its schedule string; the fixed submission is proved: every
// schedule explored, none fails. Bounds say the exploration was not complete. A host thread
// inside the schedule is explored the same way.
#include <string>

#include "racy.h"

static const UINT kGroups = 2;

// A program that depends on more than the schedule: each call dispatches more groups than
// the last, so a prefix of choices does not lead to the same choices again.
static int calls = 0;
static HRESULT Drifting(ID3D12Device* device) {
    ++calls;
    return Submit(device, 1 + calls % 3, true, true);
}

int main() {
    PIPEFENCE_EXPLORE_DESC desc = {};
    desc.Flags = PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE | PIPEFENCE_EXPLORE_FLAG_REDUCE;
    auto racy = [](ID3D12Device* d) { return Submit(d, kGroups, false, true); };
    auto fixed = [](ID3D12Device* d) { return Submit(d, kGroups, true, true); };

    // Every schedule of the racy submission: some fail.
    ExploreResult all;
    CHECK_HR(Explore(&desc, racy, &all), S_OK);
    printf("racy submission: %zu of %llu schedules fail, complete %d\n", all.Failures.size(),
           (unsigned long long)all.Schedules, (int)all.Complete);
    CHECK(all.Complete);
    CHECK(!all.Failures.empty() && all.Failures.size() < all.Schedules);
    const ScheduleFailure& first = all.Failures[0];
    CHECK(first.Result == E_FAIL);
    CHECK(first.Replay.rfind("v7:", 0) == 0);
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
    CHECK(every.Failures[0].Replay.rfind("v6:", 0) == 0);
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

    // A program that is not a function of the schedule is refused, and says why.
    CHECK_HR(Explore(&plain, Drifting, &other), E_FAIL);
    char message[512] = {};
    pipefence_last_error_message(message, sizeof message);
    printf("drifting program: %s\n", message);
    CHECK(std::string(message).find("depend on nothing but the schedule") != std::string::npos);

    // Bad input: a string that does not decode, and one whose choices this program does not
    // make (it makes none).
    CHECK_HR(ReplaySchedule(&desc, "v7:!!", racy, &other), E_INVALIDARG);
    CHECK_HR(ReplaySchedule(&desc, first.Replay.c_str(), [](ID3D12Device*) { return S_OK; },
                            &other),
             E_INVALIDARG);
    pipefence_last_error_message(message, sizeof message);
    printf("another program's schedule: %s\n", message);
    CHECK(std::string(message).find("is not a schedule of this program") != std::string::npos);
    PIPEFENCE_EXPLORE_DESC noSeeds = {};
    noSeeds.Flags = PIPEFENCE_EXPLORE_FLAG_REDUCE;
    CHECK_HR(Explore(&noSeeds, racy, &other), E_INVALIDARG);
    printf("explore_exhaustive: ok\n");
    return 0;
}
