/*
 * pipefence/d3d12.h: D3D12's names over the pipefence C API (header-only C++17).
 *
 * An engine's submission code, written against d3d12.h / d3d12_x.h, compiles against this
 * header in a test build and runs on pipefence's software GPU:
 *
 *     #include <pipefence/d3d12.h>
 *     using namespace pipefence::d3d12;
 *
 *     ID3D12Device* device = nullptr;
 *     PIPEFENCE_DEVICE_DESC desc = {};
 *     desc.WatchdogTimeoutMs = 500;
 *     CreateDevice(&desc, &device);
 *     ...
 *     queue->Wait(fence, 1);
 *     list->Wait64BitValueX(address, D3D12_COMPARISON_FUNC_GREATER_EQUAL, 1, ~0ull,
 *                           D3D12XBOX_WAIT_FLAG_NONE);
 *
 * Build and link: c++ -std=c++17 -Ipath/to/crates/pipefence-capi/include app.cpp
 *                 target/release/libpipefence_capi.a -lpthread -ldl -lm
 *
 * Everything is in namespace pipefence::d3d12 (define PIPEFENCE_D3D12_GLOBAL_NAMES before
 * including it to also bring the names into the global namespace).
 *
 * Names that <windows.h> defines as macros (S_OK, E_INVALIDARG, DXGI_ERROR_*, SUCCEEDED,
 * FAILED, INFINITE, WAIT_OBJECT_0, WAIT_TIMEOUT, TRUE, FALSE, CreateEvent) are only defined
 * here when they are not macros already, with the same values, and the Win32 types (UINT,
 * DWORD, BOOL, HANDLE, ...) are the global ones when <windows.h> came first. So the header
 * works without <windows.h> and next to it; with it, call pipefence's event functions
 * qualified (pipefence::d3d12::CreateEventW) since the global ones have the same signature.
 *
 * Objects and ownership (COM rules):
 * - Every object (ID3D12Device, ID3D12CommandQueue, ID3D12Fence, ID3D12Resource,
 *   ID3D12CommandAllocator, ID3D12GraphicsCommandList, HostThread) is created with a
 *   reference count of 1 owned by the caller; AddRef adds one, Release drops one and deletes
 *   the object with the last. Methods taking object pointers borrow them. An object keeps
 *   alive what it needs (a queue its device, submitted work its lists, fences, buffers), so
 *   they may be released in any order.
 * - HANDLEs from CreateEventW are closed with CloseHandle (a fence registration keeps what it
 *   needs; the event may be closed while registered).
 * - Out-pointers are set to nullptr on failure. A null object pointer gives E_POINTER; an
 *   object of another device E_INVALIDARG.
 * - Recording methods (Wait32BitValueX, Dispatch, ...) return void as in D3D12: an invalid
 *   argument is reported by Close() (deferred validation). GetLastErrorMessage() returns the
 *   message of this thread's last failing call (it names the object and the value).
 * - ExecuteCommandLists returns the HRESULT (D3D12's returns void; ignoring it is fine).
 * - Callbacks (Explore bodies, host threads) may throw: an exception is caught at the
 *   boundary and counts as E_FAIL.
 * - The Xbox flag values (D3D12XBOX_WAIT_FLAGS, D3D12XBOX_FLUSH,
 *   D3D12XBOX_WRITE_VALUE_BOP_FLAGS) are pipefence's: the real ones are not public.
 *   D3D12_HEAP_TYPE_PIPEFENCE_SHARED is pipefence's shared CPU/GPU heap (CUSTOM and
 *   GPU_UPLOAD are taken as it too).
 * - Map/Unmap are not provided: CPU access goes through ReadU32/ReadU64/WriteU32/WriteU64,
 *   which apply the heap rules and wake the waits a write may satisfy.
 */
#ifndef PIPEFENCE_D3D12_H
#define PIPEFENCE_D3D12_H

#include "pipefence.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace pipefence {
namespace d3d12 {

/* ---- Win32 types ------------------------------------------------------------------------ */

#if defined(_WIN32) && (defined(_WINDOWS_) || defined(_MINWINDEF_))
using ::BOOL;
using ::BYTE;
using ::DWORD;
using ::HANDLE;
using ::INT;
using ::INT64;
using ::LONG;
using ::LPCSTR;
using ::LPCWSTR;
using ::LPVOID;
using ::UINT16;
using ::UINT8;
using ::UINT;
using ::UINT32;
using ::UINT64;
using ::ULONG;
using ::SIZE_T;
using ::HRESULT;
#else
using BOOL = int;
using BYTE = std::uint8_t;
using DWORD = std::uint32_t;
using HANDLE = void*;
using INT = int;
using INT64 = std::int64_t;
using LONG = std::int32_t;
using LPCSTR = const char*;
using LPCWSTR = const wchar_t*;
using LPVOID = void*;
using UINT16 = std::uint16_t;
using UINT8 = std::uint8_t;
using UINT = unsigned int;
using UINT32 = std::uint32_t;
using UINT64 = std::uint64_t;
using ULONG = std::uint32_t;
using SIZE_T = std::size_t;
using HRESULT = PIPEFENCE_HRESULT;
#endif
using D3D12_GPU_VIRTUAL_ADDRESS = UINT64;

/* ---- Result codes and Win32 constants (skipped where <windows.h> made them macros) ------ */

#ifndef S_OK
constexpr HRESULT S_OK = PIPEFENCE_S_OK;
#endif
#ifndef S_FALSE
constexpr HRESULT S_FALSE = PIPEFENCE_S_FALSE;
#endif
#ifndef E_INVALIDARG
constexpr HRESULT E_INVALIDARG = PIPEFENCE_E_INVALIDARG;
#endif
#ifndef E_OUTOFMEMORY
constexpr HRESULT E_OUTOFMEMORY = PIPEFENCE_E_OUTOFMEMORY;
#endif
#ifndef E_NOTIMPL
constexpr HRESULT E_NOTIMPL = PIPEFENCE_E_NOTIMPL;
#endif
#ifndef E_POINTER
constexpr HRESULT E_POINTER = PIPEFENCE_E_POINTER;
#endif
#ifndef E_FAIL
constexpr HRESULT E_FAIL = PIPEFENCE_E_FAIL;
#endif
#ifndef DXGI_ERROR_INVALID_CALL
constexpr HRESULT DXGI_ERROR_INVALID_CALL = PIPEFENCE_DXGI_ERROR_INVALID_CALL;
#endif
#ifndef DXGI_ERROR_DEVICE_REMOVED
constexpr HRESULT DXGI_ERROR_DEVICE_REMOVED = PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED;
#endif
#ifndef DXGI_ERROR_DEVICE_HUNG
constexpr HRESULT DXGI_ERROR_DEVICE_HUNG = PIPEFENCE_DXGI_ERROR_DEVICE_HUNG;
#endif
#ifndef SUCCEEDED
constexpr bool SUCCEEDED(HRESULT hr) { return hr >= 0; }
#endif
#ifndef FAILED
constexpr bool FAILED(HRESULT hr) { return hr < 0; }
#endif
#ifndef INFINITE
constexpr DWORD INFINITE = PIPEFENCE_INFINITE;
#endif
#ifndef WAIT_OBJECT_0
constexpr DWORD WAIT_OBJECT_0 = PIPEFENCE_WAIT_OBJECT_0;
#endif
#ifndef WAIT_TIMEOUT
constexpr DWORD WAIT_TIMEOUT = PIPEFENCE_WAIT_TIMEOUT;
#endif
#ifndef WAIT_FAILED
constexpr DWORD WAIT_FAILED = PIPEFENCE_WAIT_FAILED;
#endif
#ifndef TRUE
constexpr BOOL TRUE = 1;
#endif
#ifndef FALSE
constexpr BOOL FALSE = 0;
#endif
/* What pipefence's CPU waits (WaitX, WaitIdleX) return on a timeout: a success code. */
constexpr HRESULT PIPEFENCE_WAIT_TIMEOUT_HR = PIPEFENCE_WAIT_TIMEOUT_HRESULT;

/* ---- D3D12 enums and structs ------------------------------------------------------------ */

#define PIPEFENCE_D3D12_FLAGS(E)                                                              \
    constexpr E operator|(E a, E b) { return E(static_cast<UINT>(a) | static_cast<UINT>(b)); } \
    constexpr E operator&(E a, E b) { return E(static_cast<UINT>(a) & static_cast<UINT>(b)); } \
    constexpr E operator^(E a, E b) { return E(static_cast<UINT>(a) ^ static_cast<UINT>(b)); } \
    inline E& operator|=(E& a, E b) { return a = a | b; }                                    \
    inline E& operator&=(E& a, E b) { return a = a & b; }

enum D3D12_COMPARISON_FUNC {
    D3D12_COMPARISON_FUNC_NONE = 0,
    D3D12_COMPARISON_FUNC_NEVER = 1,
    D3D12_COMPARISON_FUNC_LESS = 2,
    D3D12_COMPARISON_FUNC_EQUAL = 3,
    D3D12_COMPARISON_FUNC_LESS_EQUAL = 4,
    D3D12_COMPARISON_FUNC_GREATER = 5,
    D3D12_COMPARISON_FUNC_NOT_EQUAL = 6,
    D3D12_COMPARISON_FUNC_GREATER_EQUAL = 7,
    D3D12_COMPARISON_FUNC_ALWAYS = 8,
};

enum D3D12_COMMAND_LIST_TYPE {
    D3D12_COMMAND_LIST_TYPE_DIRECT = PIPEFENCE_COMMAND_LIST_TYPE_DIRECT,
    D3D12_COMMAND_LIST_TYPE_BUNDLE = 1, /* not supported: creation fails with E_INVALIDARG */
    D3D12_COMMAND_LIST_TYPE_COMPUTE = PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE,
    D3D12_COMMAND_LIST_TYPE_COPY = PIPEFENCE_COMMAND_LIST_TYPE_COPY,
};

enum D3D12_COMMAND_QUEUE_FLAGS {
    D3D12_COMMAND_QUEUE_FLAG_NONE = 0,
    D3D12_COMMAND_QUEUE_FLAG_DISABLE_GPU_TIMEOUT = 0x1, /* accepted, no effect */
};
PIPEFENCE_D3D12_FLAGS(D3D12_COMMAND_QUEUE_FLAGS)

enum D3D12_COMMAND_QUEUE_PRIORITY {
    D3D12_COMMAND_QUEUE_PRIORITY_NORMAL = 0,
    D3D12_COMMAND_QUEUE_PRIORITY_HIGH = 100,
    D3D12_COMMAND_QUEUE_PRIORITY_GLOBAL_REALTIME = 10000,
};

/* Priority and NodeMask are accepted and have no effect. */
struct D3D12_COMMAND_QUEUE_DESC {
    D3D12_COMMAND_LIST_TYPE Type;
    INT Priority;
    D3D12_COMMAND_QUEUE_FLAGS Flags;
    UINT NodeMask;
};

enum D3D12_FENCE_FLAGS {
    D3D12_FENCE_FLAG_NONE = PIPEFENCE_FENCE_FLAG_NONE,
    D3D12_FENCE_FLAG_SHARED = 0x1,               /* accepted, no effect */
    D3D12_FENCE_FLAG_SHARED_CROSS_ADAPTER = 0x2, /* accepted, no effect */
    D3D12_FENCE_FLAG_NON_MONITORED = 0x4,        /* accepted, no effect */
};
PIPEFENCE_D3D12_FLAGS(D3D12_FENCE_FLAGS)

enum D3D12_HEAP_TYPE {
    D3D12_HEAP_TYPE_DEFAULT = PIPEFENCE_HEAP_TYPE_DEFAULT,
    D3D12_HEAP_TYPE_UPLOAD = PIPEFENCE_HEAP_TYPE_UPLOAD,
    D3D12_HEAP_TYPE_READBACK = PIPEFENCE_HEAP_TYPE_READBACK,
    D3D12_HEAP_TYPE_CUSTOM = PIPEFENCE_HEAP_TYPE_CUSTOM,         /* = pipefence's shared heap */
    D3D12_HEAP_TYPE_GPU_UPLOAD = PIPEFENCE_HEAP_TYPE_GPU_UPLOAD, /* = pipefence's shared heap */
    /* pipefence's own value: CPU and GPU both read and write (unified memory). */
    D3D12_HEAP_TYPE_PIPEFENCE_SHARED = PIPEFENCE_HEAP_TYPE_SHARED,
};

enum D3D12_MULTIPLE_FENCE_WAIT_FLAGS {
    D3D12_MULTIPLE_FENCE_WAIT_FLAG_NONE = PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_NONE,
    D3D12_MULTIPLE_FENCE_WAIT_FLAG_ANY = PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_ANY,
    D3D12_MULTIPLE_FENCE_WAIT_FLAG_ALL = PIPEFENCE_MULTIPLE_FENCE_WAIT_FLAG_ALL,
};
PIPEFENCE_D3D12_FLAGS(D3D12_MULTIPLE_FENCE_WAIT_FLAGS)

/* Xbox flags: pipefence's values (the real ones are not public). */
enum D3D12XBOX_WAIT_FLAGS {
    D3D12XBOX_WAIT_FLAG_NONE = PIPEFENCE_WAIT_FLAG_NONE,
    D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP = PIPEFENCE_WAIT_FLAG_SELECT_ENGINE_PFP,
};
PIPEFENCE_D3D12_FLAGS(D3D12XBOX_WAIT_FLAGS)

enum D3D12XBOX_FLUSH {
    D3D12XBOX_FLUSH_NONE = PIPEFENCE_FLUSH_NONE,
    D3D12XBOX_FLUSH_BOP_TEXTURE_L1_INVALIDATE = PIPEFENCE_FLUSH_BOP_TEXTURE_L1_INVALIDATE,
    D3D12XBOX_FLUSH_BOP_TEXTURE_L1_VOLATILE = PIPEFENCE_FLUSH_BOP_TEXTURE_L1_VOLATILE,
    D3D12XBOX_FLUSH_BOP_TEXTURE_L2_INVALIDATE = PIPEFENCE_FLUSH_BOP_TEXTURE_L2_INVALIDATE,
    D3D12XBOX_FLUSH_BOP_TEXTURE_L2_VOLATILE = PIPEFENCE_FLUSH_BOP_TEXTURE_L2_VOLATILE,
    D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK = PIPEFENCE_FLUSH_BOP_TEXTURE_L2_WRITEBACK,
};
PIPEFENCE_D3D12_FLAGS(D3D12XBOX_FLUSH)

enum D3D12XBOX_WRITE_VALUE_BOP_FLAGS {
    D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE = PIPEFENCE_WRITE_VALUE_FLAG_NONE,
    D3D12XBOX_WRITE_VALUE_BOP_FLAG_GPU_TIMESTAMP = PIPEFENCE_WRITE_VALUE_FLAG_GPU_TIMESTAMP,
    D3D12XBOX_WRITE_VALUE_BOP_FLAG_SYSTEM_TIMESTAMP = PIPEFENCE_WRITE_VALUE_FLAG_SYSTEM_TIMESTAMP,
};
PIPEFENCE_D3D12_FLAGS(D3D12XBOX_WRITE_VALUE_BOP_FLAGS)

enum D3D12XBOX_WRITE_VALUE_TOP_FLAGS {
    D3D12XBOX_WRITE_VALUE_TOP_FLAG_NONE = PIPEFENCE_WRITE_VALUE_FLAG_NONE,
    D3D12XBOX_WRITE_VALUE_TOP_FLAG_GPU_TIMESTAMP = PIPEFENCE_WRITE_VALUE_FLAG_GPU_TIMESTAMP,
    D3D12XBOX_WRITE_VALUE_TOP_FLAG_SYSTEM_TIMESTAMP = PIPEFENCE_WRITE_VALUE_FLAG_SYSTEM_TIMESTAMP,
};
PIPEFENCE_D3D12_FLAGS(D3D12XBOX_WRITE_VALUE_TOP_FLAGS)

enum D3D12_WRITEBUFFERIMMEDIATE_MODE {
    D3D12_WRITEBUFFERIMMEDIATE_MODE_DEFAULT = PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_DEFAULT,
    D3D12_WRITEBUFFERIMMEDIATE_MODE_MARKER_IN = PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_MARKER_IN,
    D3D12_WRITEBUFFERIMMEDIATE_MODE_MARKER_OUT = PIPEFENCE_WRITEBUFFERIMMEDIATE_MODE_MARKER_OUT,
};

/* { D3D12_GPU_VIRTUAL_ADDRESS Dest; UINT32 Value; } */
using D3D12_WRITEBUFFERIMMEDIATE_PARAMETER = ::PIPEFENCE_WRITEBUFFERIMMEDIATE_PARAMETER;

/* pipefence's device description (see pipefence.h): zero-initialise, set what you need
 * (WatchdogTimeoutMs, Driver = PIPEFENCE_DRIVER_THREADED or PIPEFENCE_DRIVER_DETERMINISTIC,
 * Seed, MemoryModel = PIPEFENCE_MEMORY_MODEL_PLAIN, _VALIDATE or _STRICT, Workers,
 * FenceWaitTimeoutMs, FifoDepth). */
using PIPEFENCE_DEVICE_DESC = ::PIPEFENCE_DEVICE_DESC;
using PIPEFENCE_KERNEL = ::PIPEFENCE_KERNEL;
using PIPEFENCE_EXPLORE_DESC = ::PIPEFENCE_EXPLORE_DESC;

/* Built-in kernels for Dispatch (pipefence has no shaders). */
inline PIPEFENCE_KERNEL FillKernel(D3D12_GPU_VIRTUAL_ADDRESS Dst, UINT Value) {
    PIPEFENCE_KERNEL k = {};
    k.Type = PIPEFENCE_KERNEL_FILL;
    k.Dst = Dst;
    k.Value = Value;
    return k;
}
inline PIPEFENCE_KERNEL AddKernel(D3D12_GPU_VIRTUAL_ADDRESS Dst, D3D12_GPU_VIRTUAL_ADDRESS Src,
                                  UINT Value) {
    PIPEFENCE_KERNEL k = {};
    k.Type = PIPEFENCE_KERNEL_ADD;
    k.Dst = Dst;
    k.Src = Src;
    k.Value = Value;
    return k;
}
inline PIPEFENCE_KERNEL SumKernel(D3D12_GPU_VIRTUAL_ADDRESS Dst, D3D12_GPU_VIRTUAL_ADDRESS Src) {
    PIPEFENCE_KERNEL k = {};
    k.Type = PIPEFENCE_KERNEL_SUM;
    k.Dst = Dst;
    k.Src = Src;
    return k;
}
inline PIPEFENCE_KERNEL SpinKernel(UINT64 NanosecondsPerGroup) {
    PIPEFENCE_KERNEL k = {};
    k.Type = PIPEFENCE_KERNEL_SPIN;
    k.Ns = NanosecondsPerGroup;
    return k;
}

/* A kernel of your own: Callback(group, Context) runs once per group on the shader workers
 * (several groups at once). Context must stay valid, and be safe to share between threads,
 * while a list recording the kernel may execute. NanosecondsPerGroup: its declared cost
 * (0: the default). */
inline PIPEFENCE_KERNEL CallbackKernel(PIPEFENCE_KERNEL_FN Callback, void* Context,
                                       UINT64 NanosecondsPerGroup = 0) {
    PIPEFENCE_KERNEL k = {};
    k.Type = PIPEFENCE_KERNEL_CALLBACK;
    k.Callback = Callback;
    k.Context = Context;
    k.Ns = NanosecondsPerGroup;
    return k;
}

/* What a callback kernel sees of one group: typed access to device memory. An invalid
 * access is a page fault (it removes the device when the group returns), reads 0 and writes
 * nothing. */
class KernelContext {
public:
    explicit KernelContext(PipefenceKernelContext* c) : c_(c) {}
    UINT Group() const { return pipefence_kernel_group(c_); }
    static constexpr UINT Lanes() { return 64; }
    UINT ReadU32(D3D12_GPU_VIRTUAL_ADDRESS a) { return pipefence_kernel_read_u32(c_, a); }
    UINT64 ReadU64(D3D12_GPU_VIRTUAL_ADDRESS a) { return pipefence_kernel_read_u64(c_, a); }
    void WriteU32(D3D12_GPU_VIRTUAL_ADDRESS a, UINT v) { pipefence_kernel_write_u32(c_, a, v); }
    void WriteU64(D3D12_GPU_VIRTUAL_ADDRESS a, UINT64 v) { pipefence_kernel_write_u64(c_, a, v); }
    UINT AtomicAddU32(D3D12_GPU_VIRTUAL_ADDRESS a, UINT v) {
        return pipefence_kernel_atomic_add_u32(c_, a, v);
    }
    UINT64 AtomicAddU64(D3D12_GPU_VIRTUAL_ADDRESS a, UINT64 v) {
        return pipefence_kernel_atomic_add_u64(c_, a, v);
    }

private:
    PipefenceKernelContext* c_;
};

namespace detail {
template <class F>
void kernel_trampoline(PipefenceKernelContext* group, void* context) {
    KernelContext k(group);
    try {
        (*static_cast<const F*>(context))(k);
    } catch (...) {
        /* an exception ends the group */
    }
}
}  // namespace detail

/* A kernel running (*pShader)(KernelContext&) once per group. *pShader must outlive every
 * execution of the lists that record it and be callable from several threads at once. */
template <class F>
PIPEFENCE_KERNEL ShaderKernel(const F* pShader, UINT64 NanosecondsPerGroup = 0) {
    return CallbackKernel(&detail::kernel_trampoline<F>,
                          const_cast<void*>(static_cast<const void*>(pShader)),
                          NanosecondsPerGroup);
}

/* ---- Helpers ---------------------------------------------------------------------------- */

namespace detail {

/* Reads a text through a (buf, len, needed) function. */
template <class F>
inline std::string read_text(F&& f) {
    size_t needed = 0;
    f(static_cast<char*>(nullptr), size_t{0}, &needed);
    if (needed <= 1) return std::string();
    std::string s(needed, '\0');
    f(&s[0], s.size(), &needed);
    s.resize(needed > 0 ? needed - 1 : 0);
    return s;
}

/* A label from D3D12's (Metadata, pData, Size) marker form: Metadata 0 is a wide string
 * (PIX_EVENT_UNICODE_VERSION), anything else bytes (PIX_EVENT_ANSI_VERSION). */
inline std::string marker_text(UINT metadata, const void* data, UINT size) {
    std::string out;
    if (data == nullptr) return out;
    if (metadata == 0) {
        const wchar_t* w = static_cast<const wchar_t*>(data);
        size_t n = size / sizeof(wchar_t);
        for (size_t i = 0; i < n && w[i] != 0; ++i) {
            auto c = static_cast<std::uint32_t>(w[i]);
            if (c < 0x80) {
                out += static_cast<char>(c);
            } else if (c < 0x800) {
                out += static_cast<char>(0xC0 | (c >> 6));
                out += static_cast<char>(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                out += static_cast<char>(0xE0 | (c >> 12));
                out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
                out += static_cast<char>(0x80 | (c & 0x3F));
            } else {
                out += static_cast<char>(0xF0 | (c >> 18));
                out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
                out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
                out += static_cast<char>(0x80 | (c & 0x3F));
            }
        }
    } else {
        const char* c = static_cast<const char*>(data);
        for (UINT i = 0; i < size && c[i] != 0; ++i) out += c[i];
    }
    return out;
}

}  // namespace detail

/* The message of this thread's last failing pipefence call. */
inline std::string GetLastErrorMessage() {
    size_t n = pipefence_last_error_message(nullptr, 0);
    std::string s(n + 1, '\0');
    pipefence_last_error_message(&s[0], s.size());
    s.resize(n);
    return s;
}

/* ---- Objects ---------------------------------------------------------------------------- */

class ID3D12Device;
class ID3D12Fence;

/* The root of every object: the reference count. */
class ID3D12Object {
public:
    ID3D12Object(const ID3D12Object&) = delete;
    ID3D12Object& operator=(const ID3D12Object&) = delete;

    ULONG AddRef() { return refs_.fetch_add(1, std::memory_order_relaxed) + 1; }
    ULONG Release() {
        ULONG left = refs_.fetch_sub(1, std::memory_order_acq_rel) - 1;
        if (left == 0) delete this;
        return left;
    }
    /* Accepted for source compatibility, no effect: pipefence names objects when they are
     * created (the Name overloads of the Create methods). */
    HRESULT SetName(LPCWSTR) { return S_OK; }

protected:
    ID3D12Object() = default;
    virtual ~ID3D12Object() = default;

private:
    std::atomic<ULONG> refs_{1};
};

class ID3D12DeviceChild : public ID3D12Object {};
class ID3D12Pageable : public ID3D12DeviceChild {};

/* ID3D12Fence: a 64-bit value shared by the CPU and the queues. */
class ID3D12Fence : public ID3D12Pageable {
public:
    /* The value the last signal wrote; UINT64_MAX once the device is removed. */
    UINT64 GetCompletedValue() { return pipefence_fence_get_completed_value(h_); }
    /* CPU-side signal (last write wins; it may lower the value). */
    HRESULT Signal(UINT64 Value) { return pipefence_fence_signal(h_, Value); }
    /* Sets hEvent when the value reaches Value; a null hEvent blocks until then (also the
     * deterministic driver's way to wait: it is a scheduling point there). */
    HRESULT SetEventOnCompletion(UINT64 Value, HANDLE hEvent) {
        return pipefence_fence_set_event_on_completion(h_, Value,
                                                       static_cast<PipefenceEvent*>(hEvent));
    }
    /* pipefence: blocks until the value is >= Value, up to Milliseconds (INFINITE allowed).
     * S_OK, PIPEFENCE_WAIT_TIMEOUT_HR, or DXGI_ERROR_DEVICE_REMOVED. */
    HRESULT WaitX(UINT64 Value, DWORD Milliseconds) {
        return pipefence_fence_wait(h_, Value, Milliseconds);
    }
    PipefenceFence* GetPipefenceHandle() const { return h_; }

private:
    friend class ID3D12Device;
    explicit ID3D12Fence(PipefenceFence* h) : h_(h) {}
    ~ID3D12Fence() override { pipefence_fence_release(h_); }
    PipefenceFence* h_;
};

/* ID3D12Resource: a buffer (pipefence has no textures). */
class ID3D12Resource : public ID3D12Pageable {
public:
    D3D12_GPU_VIRTUAL_ADDRESS GetGPUVirtualAddress() {
        return pipefence_buffer_get_gpu_virtual_address(h_);
    }
    /* pipefence: CPU access under the heap rules. DXGI_ERROR_INVALID_CALL where the heap
     * forbids it (no CPU access to DEFAULT, no CPU write to READBACK), E_INVALIDARG for a
     * misaligned or out-of-range offset. A write wakes the waits it may satisfy. */
    HRESULT ReadU32(UINT64 Offset, UINT* pValue) {
        return pipefence_buffer_read_u32(h_, Offset, reinterpret_cast<std::uint32_t*>(pValue));
    }
    HRESULT ReadU64(UINT64 Offset, UINT64* pValue) {
        return pipefence_buffer_read_u64(h_, Offset, reinterpret_cast<std::uint64_t*>(pValue));
    }
    HRESULT WriteU32(UINT64 Offset, UINT Value) {
        return pipefence_buffer_write_u32(h_, Offset, Value);
    }
    HRESULT WriteU64(UINT64 Offset, UINT64 Value) {
        return pipefence_buffer_write_u64(h_, Offset, Value);
    }
    /* pipefence: the size in bytes. */
    UINT64 GetSizeX() { return pipefence_buffer_get_size(h_); }
    PipefenceBuffer* GetPipefenceHandle() const { return h_; }

private:
    friend class ID3D12Device;
    explicit ID3D12Resource(PipefenceBuffer* h) : h_(h) {}
    ~ID3D12Resource() override { pipefence_buffer_release(h_); }
    PipefenceBuffer* h_;
};

/* ID3D12CommandAllocator: accepted for source compatibility (a list owns its memory). */
class ID3D12CommandAllocator : public ID3D12Pageable {
public:
    HRESULT Reset() { return S_OK; }
    D3D12_COMMAND_LIST_TYPE GetTypeX() const { return type_; }

private:
    friend class ID3D12Device;
    explicit ID3D12CommandAllocator(D3D12_COMMAND_LIST_TYPE type) : type_(type) {}
    ~ID3D12CommandAllocator() override = default;
    D3D12_COMMAND_LIST_TYPE type_;
};

class ID3D12CommandList : public ID3D12DeviceChild {
public:
    D3D12_COMMAND_LIST_TYPE GetType() { return type_; }
    PipefenceCommandList* GetPipefenceHandle() const { return h_; }

protected:
    ID3D12CommandList(PipefenceCommandList* h, D3D12_COMMAND_LIST_TYPE type)
        : h_(h), type_(type) {}
    ~ID3D12CommandList() override { pipefence_list_release(h_); }
    PipefenceCommandList* h_;
    D3D12_COMMAND_LIST_TYPE type_;
};

/* ID3D12GraphicsCommandList with the Xbox extensions. Recording never fails: Close()
 * reports the first invalid command (deferred validation). */
class ID3D12GraphicsCommandList : public ID3D12CommandList {
public:
    void Wait32BitValueX(D3D12_GPU_VIRTUAL_ADDRESS Address,
                         D3D12_COMPARISON_FUNC ComparisonFunction, UINT ReferenceValue,
                         UINT MaskValue, D3D12XBOX_WAIT_FLAGS Flags) {
        pipefence_list_wait_value32(h_, Address, static_cast<std::uint32_t>(ComparisonFunction),
                                    ReferenceValue, MaskValue, static_cast<std::uint32_t>(Flags));
    }
    void Wait64BitValueX(D3D12_GPU_VIRTUAL_ADDRESS Address,
                         D3D12_COMPARISON_FUNC ComparisonFunction, UINT64 ReferenceValue,
                         UINT64 MaskValue, D3D12XBOX_WAIT_FLAGS Flags) {
        pipefence_list_wait_value64(h_, Address, static_cast<std::uint32_t>(ComparisonFunction),
                                    ReferenceValue, MaskValue, static_cast<std::uint32_t>(Flags));
    }
    void Write32BitValueBottomOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT Value,
                                      D3D12XBOX_FLUSH Flush,
                                      D3D12XBOX_WRITE_VALUE_BOP_FLAGS Flags) {
        pipefence_list_write_value32_bottom_of_pipe(h_, Destination, Value,
                                                    static_cast<std::uint32_t>(Flush),
                                                    static_cast<std::uint32_t>(Flags));
    }
    void Write64BitValueBottomOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT64 Value,
                                      D3D12XBOX_FLUSH Flush,
                                      D3D12XBOX_WRITE_VALUE_BOP_FLAGS Flags) {
        pipefence_list_write_value64_bottom_of_pipe(h_, Destination, Value,
                                                    static_cast<std::uint32_t>(Flush),
                                                    static_cast<std::uint32_t>(Flags));
    }
    void Write32BitValueTopOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT Value,
                                   D3D12XBOX_WRITE_VALUE_TOP_FLAGS Flags) {
        pipefence_list_write_value32_top_of_pipe(h_, Destination, Value,
                                                 static_cast<std::uint32_t>(Flags));
    }
    void Write32BitValueTopOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT Value,
                                   D3D12XBOX_WRITE_VALUE_BOP_FLAGS Flags) {
        pipefence_list_write_value32_top_of_pipe(h_, Destination, Value,
                                                 static_cast<std::uint32_t>(Flags));
    }
    void Write32BitValueTopOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT Value) {
        pipefence_list_write_value32_top_of_pipe(h_, Destination, Value, 0);
    }
    void Write64BitValueTopOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT64 Value,
                                   D3D12XBOX_WRITE_VALUE_TOP_FLAGS Flags) {
        pipefence_list_write_value64_top_of_pipe(h_, Destination, Value,
                                                 static_cast<std::uint32_t>(Flags));
    }
    void Write64BitValueTopOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT64 Value,
                                   D3D12XBOX_WRITE_VALUE_BOP_FLAGS Flags) {
        pipefence_list_write_value64_top_of_pipe(h_, Destination, Value,
                                                 static_cast<std::uint32_t>(Flags));
    }
    void Write64BitValueTopOfPipeX(D3D12_GPU_VIRTUAL_ADDRESS Destination, UINT64 Value) {
        pipefence_list_write_value64_top_of_pipe(h_, Destination, Value, 0);
    }
    void WriteBufferImmediate(UINT Count, const D3D12_WRITEBUFFERIMMEDIATE_PARAMETER* pParams,
                              const D3D12_WRITEBUFFERIMMEDIATE_MODE* pModes) {
        std::vector<std::uint32_t> modes;
        if (pModes != nullptr) {
            modes.reserve(Count);
            for (UINT i = 0; i < Count; ++i) modes.push_back(static_cast<std::uint32_t>(pModes[i]));
        }
        pipefence_list_write_buffer_immediate(h_, Count, pParams,
                                              pModes != nullptr ? modes.data() : nullptr);
    }
    /* FlushPipelineX: waits for earlier dispatches and copies, then the cache actions of
     * Flags (over the whole cache: the range is accepted and not used). */
    void FlushPipelineX(D3D12XBOX_FLUSH Flags) {
        pipefence_list_flush_pipeline(h_, static_cast<std::uint32_t>(Flags));
    }
    void FlushPipelineX(D3D12XBOX_FLUSH Flags, D3D12_GPU_VIRTUAL_ADDRESS, SIZE_T) {
        FlushPipelineX(Flags);
    }
    /* pipefence: the kernel Dispatch launches (its "pipeline state"). */
    void SetKernelX(const PIPEFENCE_KERNEL& Kernel) { pipefence_list_set_kernel(h_, &Kernel); }
    /* Launches X * Y * Z groups of the kernel set with SetKernelX. */
    void Dispatch(UINT ThreadGroupCountX, UINT ThreadGroupCountY, UINT ThreadGroupCountZ) {
        pipefence_list_dispatch(h_, ThreadGroupCountX, ThreadGroupCountY, ThreadGroupCountZ);
    }
    /* pipefence: launches Groups groups of Kernel. */
    void Dispatch(const PIPEFENCE_KERNEL& Kernel, UINT Groups) {
        pipefence_list_dispatch_kernel(h_, &Kernel, Groups);
    }
    /* pipefence: ExecuteIndirect with a dispatch signature: the group count is the UINT at
     * ArgumentAddress, read when the pre-fetch parser reaches the command. */
    void ExecuteIndirectX(const PIPEFENCE_KERNEL& Kernel,
                          D3D12_GPU_VIRTUAL_ADDRESS ArgumentAddress) {
        pipefence_list_dispatch_indirect(h_, &Kernel, ArgumentAddress);
    }
    void CopyBufferRegion(ID3D12Resource* pDstBuffer, UINT64 DstOffset,
                          ID3D12Resource* pSrcBuffer, UINT64 SrcOffset, UINT64 NumBytes) {
        pipefence_list_copy_buffer_region(
            h_, pDstBuffer != nullptr ? pDstBuffer->GetPipefenceHandle() : nullptr, DstOffset,
            pSrcBuffer != nullptr ? pSrcBuffer->GetPipefenceHandle() : nullptr, SrcOffset,
            NumBytes);
    }
    /* Markers and events, D3D12's form (Metadata 0: wide string, 1: char string) ... */
    void SetMarker(UINT Metadata, const void* pData, UINT Size) {
        std::string s = detail::marker_text(Metadata, pData, Size);
        pipefence_list_set_marker(h_, s.c_str());
    }
    void BeginEvent(UINT Metadata, const void* pData, UINT Size) {
        std::string s = detail::marker_text(Metadata, pData, Size);
        pipefence_list_begin_event(h_, s.c_str());
    }
    /* ... and with a plain label. */
    void SetMarker(const char* Label) { pipefence_list_set_marker(h_, Label); }
    void BeginEvent(const char* Label) { pipefence_list_begin_event(h_, Label); }
    void EndEvent() { pipefence_list_end_event(h_); }
    /* Validates and encodes the list: E_INVALIDARG naming the first invalid command (a PFP
     * wait with a comparison other than GREATER_EQUAL, a misaligned address, a timestamp
     * write with a non-zero value, ...); DXGI_ERROR_INVALID_CALL if already closed. */
    HRESULT Close() { return pipefence_list_close(h_); }
    /* Reopens the list, empty (the allocator and initial state are accepted, not used). */
    HRESULT Reset(ID3D12CommandAllocator* pAllocator, void* pInitialState) {
        (void)pInitialState;
        if (pAllocator != nullptr && pAllocator->GetTypeX() != type_) return E_INVALIDARG;
        return pipefence_list_reset(h_);
    }

private:
    friend class ID3D12Device;
    ID3D12GraphicsCommandList(PipefenceCommandList* h, D3D12_COMMAND_LIST_TYPE type)
        : ID3D12CommandList(h, type) {}
    ~ID3D12GraphicsCommandList() override = default;
};

/* On the Xbox the copy queue's list is ID3D12XboxDmaCommandList: here the same class. */
using ID3D12XboxDmaCommandList = ID3D12GraphicsCommandList;

/* ID3D12CommandQueue: an engine that runs submissions in order. */
class ID3D12CommandQueue : public ID3D12Pageable {
public:
    /* Queue-side wait: nothing submitted later runs until pFence reaches Value. The wait is
     * a ticket issued by this call (a later lowering of the value does not undo it). */
    HRESULT Wait(ID3D12Fence* pFence, UINT64 Value) {
        return pipefence_queue_wait(h_, pFence != nullptr ? pFence->GetPipefenceHandle() : nullptr,
                                    Value);
    }
    /* Queue-side signal: sets pFence to Value once everything submitted earlier completed. */
    HRESULT Signal(ID3D12Fence* pFence, UINT64 Value) {
        return pipefence_queue_signal(
            h_, pFence != nullptr ? pFence->GetPipefenceHandle() : nullptr, Value);
    }
    HRESULT ExecuteCommandLists(UINT NumCommandLists, ID3D12CommandList* const* ppCommandLists) {
        if (NumCommandLists > 0 && ppCommandLists == nullptr) return E_POINTER;
        std::vector<PipefenceCommandList*> lists;
        lists.reserve(NumCommandLists);
        for (UINT i = 0; i < NumCommandLists; ++i) {
            lists.push_back(ppCommandLists[i] != nullptr ? ppCommandLists[i]->GetPipefenceHandle()
                                                         : nullptr);
        }
        return pipefence_queue_execute_command_lists(h_, NumCommandLists, lists.data());
    }
    D3D12_COMMAND_QUEUE_DESC GetDesc() { return desc_; }
    HRESULT GetTimestampFrequency(UINT64* pFrequency) {
        return pipefence_queue_get_timestamp_frequency(h_,
                                                       reinterpret_cast<std::uint64_t*>(pFrequency));
    }
    HRESULT GetClockCalibration(UINT64* pGpuTimestamp, UINT64* pCpuTimestamp) {
        return pipefence_queue_get_clock_calibration(
            h_, reinterpret_cast<std::uint64_t*>(pGpuTimestamp),
            reinterpret_cast<std::uint64_t*>(pCpuTimestamp));
    }
    /* pipefence: blocks until everything submitted so far completed, up to Milliseconds. */
    HRESULT WaitIdleX(DWORD Milliseconds) { return pipefence_queue_wait_idle(h_, Milliseconds); }
    PipefenceQueue* GetPipefenceHandle() const { return h_; }

private:
    friend class ID3D12Device;
    ID3D12CommandQueue(PipefenceQueue* h, const D3D12_COMMAND_QUEUE_DESC& desc)
        : h_(h), desc_(desc) {}
    ~ID3D12CommandQueue() override { pipefence_queue_release(h_); }
    PipefenceQueue* h_;
    D3D12_COMMAND_QUEUE_DESC desc_;
};

/* ID3D12Device: creates the objects; removal and its report. */
class ID3D12Device : public ID3D12Object {
public:
    HRESULT CreateFence(UINT64 InitialValue, D3D12_FENCE_FLAGS Flags, ID3D12Fence** ppFence) {
        return CreateFence(InitialValue, Flags, ppFence, nullptr);
    }
    /* pipefence: named, for errors and reports. */
    HRESULT CreateFence(UINT64 InitialValue, D3D12_FENCE_FLAGS Flags, ID3D12Fence** ppFence,
                        const char* Name) {
        if (ppFence == nullptr) return E_POINTER;
        *ppFence = nullptr;
        PipefenceFence* h = nullptr;
        HRESULT hr = pipefence_device_create_fence(h_, InitialValue,
                                                   static_cast<std::uint32_t>(Flags), Name, &h);
        if (FAILED(hr)) return hr;
        return wrap(new (std::nothrow) ID3D12Fence(h), h, pipefence_fence_release, ppFence);
    }

    HRESULT CreateCommandQueue(const D3D12_COMMAND_QUEUE_DESC* pDesc,
                               ID3D12CommandQueue** ppCommandQueue) {
        return CreateCommandQueue(pDesc, ppCommandQueue, nullptr);
    }
    HRESULT CreateCommandQueue(const D3D12_COMMAND_QUEUE_DESC* pDesc,
                               ID3D12CommandQueue** ppCommandQueue, const char* Name) {
        if (ppCommandQueue == nullptr || pDesc == nullptr) return E_POINTER;
        *ppCommandQueue = nullptr;
        PipefenceQueue* h = nullptr;
        HRESULT hr = pipefence_device_create_queue(h_, static_cast<std::uint32_t>(pDesc->Type),
                                                   Name, &h);
        if (FAILED(hr)) return hr;
        return wrap(new (std::nothrow) ID3D12CommandQueue(h, *pDesc), h, pipefence_queue_release,
                    ppCommandQueue);
    }

    HRESULT CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE Type,
                                   ID3D12CommandAllocator** ppCommandAllocator) {
        if (ppCommandAllocator == nullptr) return E_POINTER;
        *ppCommandAllocator = nullptr;
        if (Type != D3D12_COMMAND_LIST_TYPE_DIRECT && Type != D3D12_COMMAND_LIST_TYPE_COMPUTE &&
            Type != D3D12_COMMAND_LIST_TYPE_COPY)
            return E_INVALIDARG;
        auto* a = new (std::nothrow) ID3D12CommandAllocator(Type);
        if (a == nullptr) return E_OUTOFMEMORY;
        *ppCommandAllocator = a;
        return S_OK;
    }

    /* An open list for queues of Type. pCommandAllocator may be null; pInitialState must be
     * null (pipefence has no pipeline states: see SetKernelX). */
    HRESULT CreateCommandList(UINT nodeMask, D3D12_COMMAND_LIST_TYPE Type,
                              ID3D12CommandAllocator* pCommandAllocator, void* pInitialState,
                              ID3D12GraphicsCommandList** ppCommandList) {
        return CreateCommandList(nodeMask, Type, pCommandAllocator, pInitialState, ppCommandList,
                                 nullptr);
    }
    HRESULT CreateCommandList(UINT nodeMask, D3D12_COMMAND_LIST_TYPE Type,
                              ID3D12CommandAllocator* pCommandAllocator, void* pInitialState,
                              ID3D12GraphicsCommandList** ppCommandList, const char* Name) {
        (void)nodeMask;
        if (ppCommandList == nullptr) return E_POINTER;
        *ppCommandList = nullptr;
        if (pInitialState != nullptr) return E_INVALIDARG;
        if (pCommandAllocator != nullptr && pCommandAllocator->GetTypeX() != Type)
            return E_INVALIDARG;
        PipefenceCommandList* h = nullptr;
        HRESULT hr = pipefence_device_create_command_list(h_, static_cast<std::uint32_t>(Type),
                                                          Name, &h);
        if (FAILED(hr)) return hr;
        return wrap(new (std::nothrow) ID3D12GraphicsCommandList(h, Type), h,
                    pipefence_list_release, ppCommandList);
    }

    /* pipefence's short form of CreateCommittedResource for a buffer: Size bytes (a positive
     * multiple of 4), zeroed, in HeapType. */
    HRESULT CreateBuffer(UINT64 Size, D3D12_HEAP_TYPE HeapType, ID3D12Resource** ppResource) {
        return CreateBuffer(Size, HeapType, ppResource, nullptr);
    }
    HRESULT CreateBuffer(UINT64 Size, D3D12_HEAP_TYPE HeapType, ID3D12Resource** ppResource,
                         const char* Name) {
        if (ppResource == nullptr) return E_POINTER;
        *ppResource = nullptr;
        PipefenceBuffer* h = nullptr;
        HRESULT hr = pipefence_device_create_buffer(h_, Size, static_cast<std::uint32_t>(HeapType),
                                                    Name, &h);
        if (FAILED(hr)) return hr;
        return wrap(new (std::nothrow) ID3D12Resource(h), h, pipefence_buffer_release,
                    ppResource);
    }

    /* Sets hEvent when all (FLAG_ALL / NONE) or any (FLAG_ANY) of the fences reach their
     * values; a null hEvent blocks until then. */
    HRESULT SetEventOnMultipleFenceCompletion(ID3D12Fence* const* ppFences,
                                              const UINT64* pFenceValues, UINT NumFences,
                                              D3D12_MULTIPLE_FENCE_WAIT_FLAGS Flags,
                                              HANDLE hEvent) {
        if (NumFences > 0 && ppFences == nullptr) return E_POINTER;
        std::vector<PipefenceFence*> fences;
        fences.reserve(NumFences);
        for (UINT i = 0; i < NumFences; ++i)
            fences.push_back(ppFences[i] != nullptr ? ppFences[i]->GetPipefenceHandle() : nullptr);
        return pipefence_device_set_event_on_multiple_fence_completion(
            h_, fences.data(), reinterpret_cast<const std::uint64_t*>(pFenceValues), NumFences,
            static_cast<std::uint32_t>(Flags), static_cast<PipefenceEvent*>(hEvent));
    }

    /* S_OK while the device works; DXGI_ERROR_DEVICE_HUNG after a hang or a page fault;
     * DXGI_ERROR_DEVICE_REMOVED after RemoveDevice. */
    HRESULT GetDeviceRemovedReason() { return pipefence_device_get_removed_reason(h_); }
    /* ID3D12Device5::RemoveDevice. */
    void RemoveDevice() { pipefence_device_remove(h_); }

    /* pipefence: the removal report (why, every stuck queue, the wait cycle, the fault);
     * empty while the device works. */
    std::string GetRemovalReportText() { return report(PIPEFENCE_REPORT_FORMAT_TEXT); }
    std::string GetRemovalReportJson() { return report(PIPEFENCE_REPORT_FORMAT_JSON); }
    std::string GetRemovalReport() { return report(PIPEFENCE_REPORT_FORMAT_TEXT); }
    std::string GetRemovalReport(UINT Format) { return report(Format); }
    /* The same through a buffer: Format PIPEFENCE_REPORT_FORMAT_TEXT or _JSON. */
    HRESULT GetRemovalReport(UINT Format, char* pBuffer, SIZE_T BufferSize, SIZE_T* pRequired) {
        return pipefence_device_get_removal_report(h_, Format, pBuffer, BufferSize, pRequired);
    }
    /* pipefence: hazards found so far (MemoryModel VALIDATE or STRICT). */
    UINT GetHazardCountX() { return pipefence_device_get_hazard_count(h_); }
    std::string GetHazardsX() {
        return detail::read_text([this](char* b, size_t l, size_t* n) {
            return pipefence_device_get_hazards(h_, b, l, n);
        });
    }
    /* pipefence: blocks until every queue is idle, up to Milliseconds. */
    HRESULT WaitIdleX(DWORD Milliseconds) { return pipefence_device_wait_idle(h_, Milliseconds); }

    PipefenceDevice* GetPipefenceHandle() const { return h_; }
    /* pipefence: an ID3D12Device for a C handle (adds a reference to it). */
    static ID3D12Device* FromPipefenceHandle(PipefenceDevice* h) {
        if (h == nullptr || pipefence_device_add_ref(h) == 0) return nullptr;
        auto* d = new (std::nothrow) ID3D12Device(h);
        if (d == nullptr) pipefence_device_release(h);
        return d;
    }

private:
    friend HRESULT CreateDevice(const PIPEFENCE_DEVICE_DESC*, ID3D12Device**);
    explicit ID3D12Device(PipefenceDevice* h) : h_(h) {}
    ~ID3D12Device() override { pipefence_device_release(h_); }

    template <class Obj, class H, class Rel>
    static HRESULT wrap(Obj* obj, H* h, Rel release, Obj** out) {
        if (obj == nullptr) {
            release(h);
            return E_OUTOFMEMORY;
        }
        *out = obj;
        return S_OK;
    }
    std::string report(std::uint32_t format) {
        return detail::read_text([this, format](char* b, size_t l, size_t* n) {
            return pipefence_device_get_removal_report(h_, format, b, l, n);
        });
    }
    PipefenceDevice* h_;
};

/* Creates a device. pDesc may be null (the threaded driver, a 2 s watchdog). */
inline HRESULT CreateDevice(const PIPEFENCE_DEVICE_DESC* pDesc, ID3D12Device** ppDevice) {
    if (ppDevice == nullptr) return E_POINTER;
    *ppDevice = nullptr;
    PipefenceDevice* h = nullptr;
    HRESULT hr = pipefence_device_create(pDesc, &h);
    if (FAILED(hr)) return hr;
    auto* d = new (std::nothrow) ID3D12Device(h);
    if (d == nullptr) {
        pipefence_device_release(h);
        return E_OUTOFMEMORY;
    }
    *ppDevice = d;
    return S_OK;
}

#undef PIPEFENCE_D3D12_FLAGS

}  // namespace d3d12
}  // namespace pipefence

/* ComPtr, Win32 events, exploration and host threads. */
#include "d3d12_helpers.h"

/* D3D12 code passes out-parameters through IID_PPV_ARGS: here the Create methods take the
 * typed pointer itself, so it is that pointer. And MSVC's _countof. */
#ifndef IID_PPV_ARGS
#define IID_PPV_ARGS(ppType) (ppType)
#endif
#ifndef _countof
#define _countof(array) (sizeof(array) / sizeof((array)[0]))
#endif

#ifdef PIPEFENCE_D3D12_GLOBAL_NAMES
using namespace pipefence::d3d12;
#endif

#endif /* PIPEFENCE_D3D12_H */
