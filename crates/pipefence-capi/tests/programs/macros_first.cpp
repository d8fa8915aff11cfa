// The header next to a Win32-style prelude that made the result codes and constants macros
// (as <windows.h> does): it skips those names and the program uses the macros.
#define S_OK 0
#define E_INVALIDARG ((int)0x80070057)
#define E_POINTER ((int)0x80004003)
#define SUCCEEDED(hr) ((hr) >= 0)
#define FAILED(hr) ((hr) < 0)
#define INFINITE 0xFFFFFFFF
#define WAIT_OBJECT_0 0
#define TRUE 1
#define FALSE 0
#define CreateEvent CreateEventW

#include <pipefence/d3d12.h>

#include "check.h"

using namespace pipefence::d3d12;

int main() {
    ID3D12Device* device = nullptr;
    CHECK(SUCCEEDED(CreateDevice(nullptr, &device)));
    ID3D12Fence* fence = nullptr;
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, &fence), S_OK);
    CHECK_HR(device->CreateFence(0, D3D12_FENCE_FLAG_NONE, nullptr), E_POINTER);
    HANDLE event = CreateEvent(nullptr, FALSE, FALSE, nullptr);
    CHECK_HR(fence->SetEventOnCompletion(1, event), S_OK);
    CHECK_HR(fence->Signal(1), S_OK);
    CHECK(WaitForSingleObject(event, INFINITE) == WAIT_OBJECT_0);
    CHECK(CloseHandle(event) == TRUE);
    fence->Release();
    device->Release();
    printf("macros_first: ok\n");
    return 0;
}
