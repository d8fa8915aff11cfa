/*
 * pipefence/d3d12_helpers.h: the helpers of pipefence/d3d12.h (a ComPtr, Win32-shaped events,
 * exploration over deterministic schedules, host threads). Included by d3d12.h; include
 * that one.
 */
#ifndef PIPEFENCE_D3D12_HELPERS_H
#define PIPEFENCE_D3D12_HELPERS_H

#include "d3d12.h"

namespace pipefence {
namespace d3d12 {

/* ---- COM helpers ------------------------------------------------------------------------ */

/* A minimal Microsoft::WRL::ComPtr: holds one reference. */
template <class T>
class ComPtr {
public:
    ComPtr() = default;
    ComPtr(std::nullptr_t) {}
    ComPtr(T* p) : p_(p) {
        if (p_) p_->AddRef();
    }
    ComPtr(const ComPtr& o) : ComPtr(o.p_) {}
    ComPtr(ComPtr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    ~ComPtr() { Reset(); }
    ComPtr& operator=(ComPtr o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    T* Get() const { return p_; }
    T* operator->() const { return p_; }
    explicit operator bool() const { return p_ != nullptr; }
    /* The address of the pointer, for a Create method's out-parameter (releases first). */
    T** ReleaseAndGetAddressOf() {
        Reset();
        return &p_;
    }
    T** GetAddressOf() { return &p_; }
    T* const* GetAddressOf() const { return &p_; }
    T** operator&() { return ReleaseAndGetAddressOf(); }
    ULONG Reset() {
        T* p = p_;
        p_ = nullptr;
        return p ? p->Release() : 0;
    }
    /* Gives up the reference without releasing it. */
    T* Detach() {
        T* p = p_;
        p_ = nullptr;
        return p;
    }
    void Attach(T* p) {
        Reset();
        p_ = p;
    }

private:
    T* p_ = nullptr;
};

/* ---- Win32 events ----------------------------------------------------------------------- */

/* An event HANDLE: auto-reset unless bManualReset, set at once if bInitialState. nullptr on
 * failure. Close it with CloseHandle. */
inline HANDLE CreateEventW(void* lpEventAttributes, BOOL bManualReset, BOOL bInitialState,
                           LPCWSTR lpName) {
    (void)lpEventAttributes;
    (void)lpName;
    PipefenceEvent* e = nullptr;
    if (FAILED(pipefence_event_create(bManualReset, bInitialState, &e))) return nullptr;
    return e;
}
inline HANDLE CreateEventA(void* lpEventAttributes, BOOL bManualReset, BOOL bInitialState,
                           const char* lpName) {
    (void)lpName;
    return CreateEventW(lpEventAttributes, bManualReset, bInitialState, nullptr);
}
#ifndef CreateEvent
inline HANDLE CreateEvent(void* lpEventAttributes, BOOL bManualReset, BOOL bInitialState,
                          LPCWSTR lpName) {
    return CreateEventW(lpEventAttributes, bManualReset, bInitialState, lpName);
}
#endif
/* WAIT_OBJECT_0 once set (an auto-reset event is reset by it), WAIT_TIMEOUT after
 * dwMilliseconds (INFINITE: no timeout), WAIT_FAILED for a bad handle. On the deterministic
 * driver it waits through the scheduler for the fences the event was registered on, and
 * returns WAIT_TIMEOUT at once when nothing can run. */
inline DWORD WaitForSingleObject(HANDLE hHandle, DWORD dwMilliseconds) {
    return pipefence_event_wait(static_cast<PipefenceEvent*>(hHandle), dwMilliseconds);
}
inline BOOL SetEvent(HANDLE hEvent) {
    return SUCCEEDED(pipefence_event_set(static_cast<PipefenceEvent*>(hEvent))) ? TRUE : FALSE;
}
inline BOOL ResetEvent(HANDLE hEvent) {
    return SUCCEEDED(pipefence_event_reset(static_cast<PipefenceEvent*>(hEvent))) ? TRUE : FALSE;
}
/* Closes an event HANDLE. FALSE for a handle that is not one. */
inline BOOL CloseHandle(HANDLE hObject) {
    auto* e = static_cast<PipefenceEvent*>(hObject);
    if (pipefence_event_add_ref(e) == 0) return FALSE; /* not a live event handle */
    pipefence_event_release(e);
    pipefence_event_release(e);
    return TRUE;
}

/* ---- Exploration and host threads ------------------------------------------------------- */

/* A failing schedule. */
struct ScheduleFailure {
    UINT64 Seed = 0;
    HRESULT Result = S_OK;        /* what the body returned */
    HRESULT RemovedReason = S_OK; /* the device's removal reason at the end */
    UINT Hazards = 0;
    UINT64 VirtualNs = 0;
    std::string Replay; /* "--driver deterministic --seed N": ReplaySchedule takes it */
    std::string Report; /* the removal report and hazards, as text */
};

struct ExploreResult {
    UINT64 Schedules = 0;
    std::vector<ScheduleFailure> Failures;
    /* PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE explored every schedule (with no failure: a proof for
     * this program in the model); false for seeds, replays and bounded explorations. */
    bool Complete = false;
};

namespace detail {

template <class F>
HRESULT schedule_trampoline(PipefenceDevice* device, void* context) {
    F& body = *static_cast<F*>(context);
    ID3D12Device* d = ID3D12Device::FromPipefenceHandle(device);
    if (d == nullptr) return E_OUTOFMEMORY;
    HRESULT hr;
    try {
        hr = body(d);
    } catch (...) {
        hr = E_FAIL;
    }
    d->Release();
    return hr;
}

inline HRESULT collect(HRESULT hr, PipefenceExploreResult* r, ExploreResult* out) {
    if (FAILED(hr)) return hr;
    out->Schedules = pipefence_explore_result_get_schedule_count(r);
    out->Complete = pipefence_explore_result_is_complete(r) != 0;
    out->Failures.clear();
    std::uint32_t n = pipefence_explore_result_get_failure_count(r);
    for (std::uint32_t i = 0; i < n; ++i) {
        PIPEFENCE_SCHEDULE_FAILURE f = {};
        pipefence_explore_result_get_failure(r, i, &f);
        ScheduleFailure s;
        s.Seed = f.Seed;
        s.Result = f.Result;
        s.RemovedReason = f.RemovedReason;
        s.Hazards = f.Hazards;
        s.VirtualNs = f.VirtualNs;
        s.Replay = read_text([r, i](char* b, size_t l, size_t* nd) {
            return pipefence_explore_result_get_replay(r, i, b, l, nd);
        });
        s.Report = read_text([r, i](char* b, size_t l, size_t* nd) {
            return pipefence_explore_result_get_report(r, i, PIPEFENCE_REPORT_FORMAT_TEXT, b, l,
                                                       nd);
        });
        out->Failures.push_back(std::move(s));
    }
    pipefence_explore_result_release(r);
    return S_OK;
}

template <class F>
HRESULT host_trampoline(void* context) {
    std::unique_ptr<F> body(static_cast<F*>(context));
    try {
        return (*body)();
    } catch (...) {
        return E_FAIL;
    }
}

}  // namespace detail

/* Runs Body (HRESULT(ID3D12Device*)) once per schedule of the deterministic driver, on a
 * fresh device each time (see pipefence_explore: seeds FirstSeed .., each seed's strategy as
 * `pipefence check` picks it; with PIPEFENCE_EXPLORE_FLAG_EXHAUSTIVE every schedule, with
 * PIPEFENCE_EXPLORE_FLAG_REDUCE up to the order of independent actions when the threads share
 * nothing but pipefence objects, and ExploreResult::Complete says whether that was all). A schedule fails when Body returns a failure (or throws),
 * when the device ends removed (unless PIPEFENCE_EXPLORE_FLAG_ALLOW_REMOVAL), or with
 * hazards under PIPEFENCE_EXPLORE_FLAG_FAIL_ON_HAZARD. The device Body gets is borrowed
 * (AddRef it to keep it). Inside Body, wait for fences with SetEventOnCompletion(v, nullptr)
 * or WaitX (scheduling points), and start threads with CreateHostThread. */
template <class F>
HRESULT Explore(const PIPEFENCE_EXPLORE_DESC* pDesc, F&& Body, ExploreResult* pResult) {
    if (pResult == nullptr) return E_POINTER;
    auto call = [&Body](ID3D12Device* d) -> HRESULT { return Body(d); };
    PipefenceExploreResult* r = nullptr;
    HRESULT hr = pipefence_explore(pDesc, &detail::schedule_trampoline<decltype(call)>, &call, &r);
    return detail::collect(hr, r, pResult);
}

/* Runs exactly the schedule of a replay string (ScheduleFailure::Replay: a seed's flags, or
 * an exhaustive exploration's schedule string). */
template <class F>
HRESULT ReplaySchedule(const PIPEFENCE_EXPLORE_DESC* pDesc, const char* Replay, F&& Body,
                       ExploreResult* pResult) {
    if (pResult == nullptr) return E_POINTER;
    auto call = [&Body](ID3D12Device* d) -> HRESULT { return Body(d); };
    PipefenceExploreResult* r = nullptr;
    HRESULT hr = pipefence_explore_replay(pDesc, Replay,
                                          &detail::schedule_trampoline<decltype(call)>, &call, &r);
    return detail::collect(hr, r, pResult);
}

/* A host thread in the device's schedule (CreateHostThread). */
class HostThread : public ID3D12Object {
public:
    /* Waits for it (a scheduling point on the deterministic driver); *pResult (may be null)
     * gets what its body returned. DXGI_ERROR_INVALID_CALL if already joined. */
    HRESULT Join(HRESULT* pResult) { return pipefence_host_join(h_, pResult); }
    HRESULT Join() { return Join(nullptr); }

private:
    template <class F>
    friend HRESULT CreateHostThread(ID3D12Device*, const char*, F&&, HostThread**);
    explicit HostThread(PipefenceHost* h) : h_(h) {}
    ~HostThread() override { pipefence_host_release(h_); }
    PipefenceHost* h_;
};

/* Starts a host thread named Name running Body (HRESULT()). On the threaded driver an
 * ordinary thread; on the deterministic driver it joins the schedule, and every pipefence
 * call it makes is a scheduling point. Releasing it unjoined lets it run on. */
template <class F>
HRESULT CreateHostThread(ID3D12Device* pDevice, const char* Name, F&& Body,
                         HostThread** ppThread) {
    using Fn = std::decay_t<F>;
    if (ppThread == nullptr || pDevice == nullptr) return E_POINTER;
    *ppThread = nullptr;
    Fn* body = new (std::nothrow) Fn(std::forward<F>(Body));
    if (body == nullptr) return E_OUTOFMEMORY;
    PipefenceHost* h = nullptr;
    HRESULT hr = pipefence_host_spawn(pDevice->GetPipefenceHandle(), Name,
                                      &detail::host_trampoline<Fn>, body, &h);
    if (FAILED(hr)) {
        delete body;
        return hr;
    }
    auto* t = new (std::nothrow) HostThread(h);
    if (t == nullptr) {
        pipefence_host_release(h);
        return E_OUTOFMEMORY;
    }
    *ppThread = t;
    return S_OK;
}

/* Sleeps: real time on the threaded driver, virtual time (a scheduling point) on the
 * deterministic one. */
inline HRESULT HostSleep(ID3D12Device* pDevice, DWORD Milliseconds) {
    if (pDevice == nullptr) return E_POINTER;
    return pipefence_host_sleep(pDevice->GetPipefenceHandle(), Milliseconds);
}

}  // namespace d3d12
}  // namespace pipefence

#endif /* PIPEFENCE_D3D12_HELPERS_H */
