// The unsatisfied wait: a Wait64BitValueX on a value nobody writes hangs the GPU. The
// watchdog removes the device: GetDeviceRemovedReason() is DXGI_ERROR_DEVICE_HUNG, every
// fence reads UINT64_MAX, waiters are released, later submissions fail with
// DXGI_ERROR_DEVICE_REMOVED, and the removal report names the stuck queue and its wait. On
// both drivers.
#include <pipefence/d3d12.h>

#include <chrono>
#include <string>
#include <thread>

#include "check.h"

using namespace pipefence::d3d12;

static void Hang(std::uint32_t driver) {
    PIPEFENCE_DEVICE_DESC desc = {};
    desc.WatchdogTimeoutMs = 200;
    desc.Driver = driver;
    ID3D12Device* device = nullptr;
    CHECK_HR(CreateDevice(&desc, &device), S_OK);

    D3D12_COMMAND_QUEUE_DESC queueDesc = {};
    queueDesc.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
    ID3D12CommandQueue* queue = nullptr;
    CHECK_HR(device->CreateCommandQueue(&queueDesc, &queue, "async"), S_OK);
    ID3D12Fence* fence = nullptr;
    ID3D12Fence* other = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &fence, "frame"), S_OK);
    CHECK_HR(device->CreateFence(5, D3D12_FENCE_FLAG_NONE, &other, "other"), S_OK);
    ID3D12Resource* flag = nullptr;
    CHECK_HR(device->CreateBuffer(64, D3D12_HEAP_TYPE_DEFAULT, &flag, "flag"), S_OK);

    ID3D12GraphicsCommandList* list = nullptr;
    CHECK_HR(device->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, nullptr, nullptr,
                                       &list, "stuck"),
             S_OK);
    list->Wait64BitValueX(flag->GetGPUVirtualAddress(), D3D12_COMPARISON_FUNC_EQUAL, 1,
                          0xFFFFFFFFFFFFFFFFull, D3D12XBOX_WAIT_FLAG_NONE);
    CHECK_HR(list->Close(), S_OK);
    ID3D12CommandList* lists[] = {list};
    CHECK_HR(queue->ExecuteCommandLists(1, lists), S_OK);
    CHECK_HR(queue->Signal(fence, 1), S_OK);

    // The event is released by the removal (the fence then reads UINT64_MAX).
    HANDLE event = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    CHECK_HR(fence->SetEventOnCompletion(1, event), S_OK);
    CHECK(WaitForSingleObject(event, 30000) == WAIT_OBJECT_0);

    CHECK_HR(device->GetDeviceRemovedReason(), DXGI_ERROR_DEVICE_HUNG);
    CHECK(fence->GetCompletedValue() == UINT64_MAX);
    // Removal marks the fences one after another: the event above was released by the first,
    // so give the others a bounded moment.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (other->GetCompletedValue() != UINT64_MAX && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(other->GetCompletedValue() == UINT64_MAX);
    CHECK_HR(queue->Signal(fence, 2), DXGI_ERROR_DEVICE_REMOVED);
    CHECK_HR(queue->ExecuteCommandLists(1, lists), DXGI_ERROR_DEVICE_REMOVED);
    CHECK_HR(fence->Signal(3), DXGI_ERROR_DEVICE_REMOVED);
    CHECK_HR(fence->WaitX(1, 0), DXGI_ERROR_DEVICE_REMOVED);
    CHECK_HR(fence->SetEventOnCompletion(7, nullptr), S_OK);  // returns at once after removal
    ID3D12Fence* late = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &late), DXGI_ERROR_DEVICE_REMOVED);

    std::string text = device->GetRemovalReportText();
    printf("%s\n", text.c_str());
    CHECK(text.find("0x887A0006") != std::string::npos);
    CHECK(text.find("async") != std::string::npos);
    CHECK(text.find("flag") != std::string::npos);
    std::string json = device->GetRemovalReportJson();
    CHECK(json.find("\"reason\": \"hung\"") != std::string::npos);
    CHECK(json.find("\"queue\": \"async\"") != std::string::npos);
    // The buffer form: the size first, then a short buffer is cut and says so.
    SIZE_T needed = 0;
    CHECK_HR(device->GetRemovalReport(PIPEFENCE_REPORT_FORMAT_TEXT, nullptr, 0, &needed),
             PIPEFENCE_E_NOT_SUFFICIENT_BUFFER);
    CHECK(needed == text.size() + 1);
    char small[8];
    CHECK_HR(device->GetRemovalReport(PIPEFENCE_REPORT_FORMAT_TEXT, small, sizeof small, &needed),
             PIPEFENCE_E_NOT_SUFFICIENT_BUFFER);
    CHECK(std::string(small) == text.substr(0, 7));
    CHECK_HR(device->GetRemovalReport(9, nullptr, 0, &needed), E_INVALIDARG);

    CloseHandle(event);
    list->Release();
    flag->Release();
    other->Release();
    fence->Release();
    queue->Release();
    device->Release();
}

int main() {
    Hang(PIPEFENCE_DRIVER_THREADED);
    // On the deterministic driver the watchdog runs in virtual time: the same, at once.
    Hang(PIPEFENCE_DRIVER_DETERMINISTIC);
    printf("hang: ok\n");
    return 0;
}
