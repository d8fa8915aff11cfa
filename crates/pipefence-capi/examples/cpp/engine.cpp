// An engine's submission layer, written as it would be against d3d12_x.h, running on
// pipefence. Each frame has three passes on three queues:
//
//   direct  "scene"    fills the frame's scene buffer, raises a 64-bit flag bottom-of-pipe
//                      (L2 writeback, so the data is visible before the flag)
//   compute "lighting" waits for the flag on its pre-fetch parser, lights the scene
//                      (adds 1), signals the compute fence
//   copy    "readback" waits for the compute fence, copies the lit buffer to readback,
//                      signals the frame fence
//
// Two frames are in flight: before a frame context is reused the CPU waits for its fence
// value, then checks what the GPU wrote. The same Renderer runs once on the threaded driver
// (real threads, real time) and then under 20 schedules of the deterministic driver, which
// would report any schedule where a frame reads the wrong data.
//
// Build and run (from the repository root):
//   cargo build --release -p pipefence-capi
//   c++ -std=c++17 -Icrates/pipefence-capi/include -o engine
//       crates/pipefence-capi/examples/cpp/engine.cpp target/release/libpipefence_capi.a
//       -lpthread -ldl -lm
//   ./engine
// (the c++ command is one line)
#include <pipefence/d3d12.h>

#include <cstdio>
#include <string>

using namespace pipefence::d3d12;

#define RETURN_IF_FAILED(expr)                                                            \
    do {                                                                                  \
        HRESULT hr_ = (expr);                                                             \
        if (FAILED(hr_)) {                                                                \
            std::fprintf(stderr, "%s failed: 0x%08X: %s\n", #expr, static_cast<unsigned>(hr_), \
                         GetLastErrorMessage().c_str());                                  \
            return hr_;                                                                   \
        }                                                                                 \
    } while (0)

constexpr UINT kFramesInFlight = 2;
constexpr UINT kGroups = 8;                       // 8 groups of 64 lanes
constexpr UINT64 kBytes = UINT64(kGroups) * 64 * 4; // per frame

struct FrameContext {
    ID3D12CommandAllocator* allocator = nullptr;
    ID3D12GraphicsCommandList* scene = nullptr;
    ID3D12GraphicsCommandList* lighting = nullptr;
    ID3D12GraphicsCommandList* readback = nullptr;
    UINT64 fenceValue = 0;  // the frame fence value that retires this context
    UINT frame = 0;         // the frame it last rendered
};

class Renderer {
public:
    // `cpuWaitsBlock`: wait for fences with the null HANDLE (a blocking wait, and the way to
    // wait on the deterministic driver) rather than an event.
    HRESULT Init(ID3D12Device* device, bool cpuWaitsBlock) {
        device_ = device;
        device_->AddRef();
        cpuWaitsBlock_ = cpuWaitsBlock;
        D3D12_COMMAND_QUEUE_DESC desc = {};
        desc.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
        RETURN_IF_FAILED(device_->CreateCommandQueue(&desc, &direct_, "direct"));
        desc.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
        RETURN_IF_FAILED(device_->CreateCommandQueue(&desc, &compute_, "compute"));
        desc.Type = D3D12_COMMAND_LIST_TYPE_COPY;
        RETURN_IF_FAILED(device_->CreateCommandQueue(&desc, &copy_, "copy"));
        RETURN_IF_FAILED(device_->CreateFence(0, D3D12_FENCE_FLAG_NONE, &frameFence_, "frame"));
        RETURN_IF_FAILED(
            device_->CreateFence(0, D3D12_FENCE_FLAG_NONE, &computeFence_, "lighting-done"));
        RETURN_IF_FAILED(device_->CreateBuffer(kBytes * kFramesInFlight, D3D12_HEAP_TYPE_DEFAULT,
                                               &scene_, "scene"));
        RETURN_IF_FAILED(device_->CreateBuffer(kBytes * kFramesInFlight, D3D12_HEAP_TYPE_DEFAULT,
                                               &lit_, "lit"));
        RETURN_IF_FAILED(device_->CreateBuffer(kBytes * kFramesInFlight,
                                               D3D12_HEAP_TYPE_READBACK, &readback_, "readback"));
        RETURN_IF_FAILED(device_->CreateBuffer(256, D3D12_HEAP_TYPE_DEFAULT, &flags_, "flags"));
        event_ = CreateEventW(nullptr, FALSE, FALSE, nullptr);
        if (event_ == nullptr) return E_OUTOFMEMORY;
        for (UINT i = 0; i < kFramesInFlight; ++i) {
            FrameContext& f = frames_[i];
            RETURN_IF_FAILED(
                device_->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_DIRECT, &f.allocator));
            RETURN_IF_FAILED(device_->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT,
                                                        f.allocator, nullptr, &f.scene));
            RETURN_IF_FAILED(device_->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE,
                                                        nullptr, nullptr, &f.lighting));
            RETURN_IF_FAILED(device_->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COPY, nullptr,
                                                        nullptr, &f.readback));
            RETURN_IF_FAILED(f.scene->Close());
            RETURN_IF_FAILED(f.lighting->Close());
            RETURN_IF_FAILED(f.readback->Close());
        }
        return S_OK;
    }

    HRESULT RenderFrame(UINT frame) {
        const UINT slot = frame % kFramesInFlight;
        FrameContext& f = frames_[slot];
        // Reuse the context only once the GPU retired it, and check its result.
        RETURN_IF_FAILED(WaitForFence(frameFence_, f.fenceValue));
        if (f.fenceValue != 0) RETURN_IF_FAILED(CheckFrame(f, slot));

        const D3D12_GPU_VIRTUAL_ADDRESS scene = scene_->GetGPUVirtualAddress() + slot * kBytes;
        const D3D12_GPU_VIRTUAL_ADDRESS lit = lit_->GetGPUVirtualAddress() + slot * kBytes;
        const D3D12_GPU_VIRTUAL_ADDRESS flag = flags_->GetGPUVirtualAddress() + slot * 8;
        const UINT64 value = ++fenceValue_;

        RETURN_IF_FAILED(f.allocator->Reset());
        RETURN_IF_FAILED(f.scene->Reset(f.allocator, nullptr));
        f.scene->BeginEvent("scene");
        f.scene->SetKernelX(FillKernel(scene, frame * 100));
        f.scene->Dispatch(kGroups, 1, 1);
        f.scene->EndEvent();
        f.scene->Write64BitValueBottomOfPipeX(flag, value, D3D12XBOX_FLUSH_BOP_TEXTURE_L2_WRITEBACK,
                                              D3D12XBOX_WRITE_VALUE_BOP_FLAG_NONE);
        RETURN_IF_FAILED(f.scene->Close());

        RETURN_IF_FAILED(f.lighting->Reset(nullptr, nullptr));
        f.lighting->SetMarker("lighting");
        f.lighting->Wait64BitValueX(flag, D3D12_COMPARISON_FUNC_GREATER_EQUAL, value,
                                    0xFFFFFFFFFFFFFFFFull, D3D12XBOX_WAIT_FLAG_SELECT_ENGINE_PFP);
        f.lighting->Dispatch(AddKernel(lit, scene, 1), kGroups);
        RETURN_IF_FAILED(f.lighting->Close());

        RETURN_IF_FAILED(f.readback->Reset(nullptr, nullptr));
        f.readback->CopyBufferRegion(readback_, slot * kBytes, lit_, slot * kBytes, kBytes);
        RETURN_IF_FAILED(f.readback->Close());

        ID3D12CommandList* scenePass[] = {f.scene};
        ID3D12CommandList* lightingPass[] = {f.lighting};
        ID3D12CommandList* readbackPass[] = {f.readback};
        RETURN_IF_FAILED(compute_->ExecuteCommandLists(1, lightingPass));
        RETURN_IF_FAILED(compute_->Signal(computeFence_, value));
        RETURN_IF_FAILED(direct_->ExecuteCommandLists(1, scenePass));
        RETURN_IF_FAILED(copy_->Wait(computeFence_, value));
        RETURN_IF_FAILED(copy_->ExecuteCommandLists(1, readbackPass));
        RETURN_IF_FAILED(copy_->Signal(frameFence_, value));
        f.fenceValue = value;
        f.frame = frame;
        return S_OK;
    }

    // Waits for every frame in flight and checks them.
    HRESULT Flush() {
        for (UINT slot = 0; slot < kFramesInFlight; ++slot) {
            FrameContext& f = frames_[slot];
            if (f.fenceValue == 0) continue;
            RETURN_IF_FAILED(WaitForFence(frameFence_, f.fenceValue));
            RETURN_IF_FAILED(CheckFrame(f, slot));
            f.fenceValue = 0;
        }
        return device_->GetDeviceRemovedReason();
    }

    UINT FramesChecked() const { return checked_; }

    ~Renderer() {
        for (FrameContext& f : frames_) {
            if (f.readback) f.readback->Release();
            if (f.lighting) f.lighting->Release();
            if (f.scene) f.scene->Release();
            if (f.allocator) f.allocator->Release();
        }
        if (event_) CloseHandle(event_);
        for (ID3D12Object* o : std::initializer_list<ID3D12Object*>{
                 flags_, readback_, lit_, scene_, computeFence_, frameFence_, copy_, compute_,
                 direct_, device_})
            if (o) o->Release();
    }

private:
    HRESULT WaitForFence(ID3D12Fence* fence, UINT64 value) {
        if (fence->GetCompletedValue() >= value) return S_OK;
        if (cpuWaitsBlock_) return fence->SetEventOnCompletion(value, nullptr);
        RETURN_IF_FAILED(fence->SetEventOnCompletion(value, event_));
        if (WaitForSingleObject(event_, 10000) != WAIT_OBJECT_0) return E_FAIL;
        return S_OK;
    }

    HRESULT CheckFrame(const FrameContext& f, UINT slot) {
        RETURN_IF_FAILED(device_->GetDeviceRemovedReason());
        for (UINT64 i = 0; i < kBytes / 4; i += 61) {
            UINT v = 0;
            RETURN_IF_FAILED(readback_->ReadU32(slot * kBytes + 4 * i, &v));
            if (v != f.frame * 100 + 1) {
                std::fprintf(stderr, "frame %u: element %llu is %u, expected %u\n", f.frame,
                             static_cast<unsigned long long>(i), v, f.frame * 100 + 1);
                return E_FAIL;
            }
        }
        ++checked_;
        return S_OK;
    }

    ID3D12Device* device_ = nullptr;
    ID3D12CommandQueue* direct_ = nullptr;
    ID3D12CommandQueue* compute_ = nullptr;
    ID3D12CommandQueue* copy_ = nullptr;
    ID3D12Fence* frameFence_ = nullptr;
    ID3D12Fence* computeFence_ = nullptr;
    ID3D12Resource* scene_ = nullptr;
    ID3D12Resource* lit_ = nullptr;
    ID3D12Resource* readback_ = nullptr;
    ID3D12Resource* flags_ = nullptr;
    HANDLE event_ = nullptr;
    FrameContext frames_[kFramesInFlight];
    UINT64 fenceValue_ = 0;
    UINT checked_ = 0;
    bool cpuWaitsBlock_ = false;
};

static HRESULT RunFrames(ID3D12Device* device, bool cpuWaitsBlock, UINT frames, UINT* checked) {
    Renderer renderer;
    RETURN_IF_FAILED(renderer.Init(device, cpuWaitsBlock));
    for (UINT frame = 1; frame <= frames; ++frame) RETURN_IF_FAILED(renderer.RenderFrame(frame));
    RETURN_IF_FAILED(renderer.Flush());
    if (checked) *checked = renderer.FramesChecked();
    return S_OK;
}

int main() {
    // Real threads, real time.
    PIPEFENCE_DEVICE_DESC desc = {};
    desc.WatchdogTimeoutMs = 2000;
    ID3D12Device* device = nullptr;
    RETURN_IF_FAILED(CreateDevice(&desc, &device));
    UINT checked = 0;
    HRESULT hr = RunFrames(device, false, 8, &checked);
    if (FAILED(hr)) {
        std::fprintf(stderr, "%s\n", device->GetRemovalReportText().c_str());
        device->Release();
        return 1;
    }
    device->Release();
    std::printf("threaded driver: %u frames checked\n", checked);

    // The same code under 20 deterministic schedules.
    PIPEFENCE_EXPLORE_DESC explore = {};
    explore.Schedules = 20;
    ExploreResult result;
    RETURN_IF_FAILED(Explore(&explore,
                             [](ID3D12Device* d) { return RunFrames(d, true, 4, nullptr); },
                             &result));
    std::printf("deterministic driver: %llu schedules, %zu failing\n",
                static_cast<unsigned long long>(result.Schedules), result.Failures.size());
    for (const ScheduleFailure& f : result.Failures)
        std::printf("  replay with %s\n%s\n", f.Replay.c_str(), f.Report.c_str());
    return result.Failures.empty() ? 0 : 1;
}
