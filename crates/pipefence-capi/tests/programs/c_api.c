/* The C API from C: handles and their reference counts, the checks at the boundary
 * (E_POINTER, E_INVALIDARG for foreign and wrong-kind handles), the last-error message, a
 * submission with a memory-value handshake, a host thread, and a short exploration. */
#include <pipefence/pipefence.h>

#include <string.h>

#include "check.h"

static PIPEFENCE_HRESULT signal_from_host(void* context) {
    return pipefence_fence_signal((PipefenceFence*)context, 3);
}

/* A callback kernel: group g stores g + 1 at dst[g] and adds 1 to the counter at 0. */
static void count_groups(PipefenceKernelContext* group, void* context) {
    uint64_t base = *(const uint64_t*)context;
    uint32_t g = pipefence_kernel_group(group);
    pipefence_kernel_write_u32(group, base + 8 + 4 * (uint64_t)g, g + 1);
    pipefence_kernel_atomic_add_u64(group, base, 1);
}

/* One schedule: a CPU write released by a queue wait on a fence the body signals. */
static PIPEFENCE_HRESULT schedule(PipefenceDevice* device, void* context) {
    int* calls = (int*)context;
    PipefenceQueue* q = NULL;
    PipefenceFence* f = NULL;
    PIPEFENCE_HRESULT hr;
    ++*calls;
    hr = pipefence_device_create_queue(device, PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE, "q", &q);
    if (hr < 0) return hr;
    hr = pipefence_device_create_fence(device, 0, PIPEFENCE_FENCE_FLAG_NONE, "f", &f);
    if (hr >= 0) hr = pipefence_queue_signal(q, f, 1);
    if (hr >= 0) hr = pipefence_fence_wait(f, 1, PIPEFENCE_INFINITE);
    if (hr >= 0 && pipefence_fence_get_completed_value(f) != 1) hr = PIPEFENCE_E_FAIL;
    pipefence_fence_release(f);
    pipefence_queue_release(q);
    return hr;
}

int main(void) {
    PIPEFENCE_DEVICE_DESC desc;
    PipefenceDevice* device = NULL;
    PipefenceDevice* other = NULL;
    PipefenceQueue* direct = NULL;
    PipefenceQueue* compute = NULL;
    PipefenceFence* fence = NULL;
    PipefenceFence* foreign = NULL;
    PipefenceBuffer* flags = NULL;
    PipefenceCommandList* produce = NULL;
    PipefenceCommandList* consume = NULL;
    PipefenceCommandList* lists[1];
    PipefenceEvent* event = NULL;
    PipefenceHost* host = NULL;
    PIPEFENCE_KERNEL fill;
    PIPEFENCE_HRESULT result = 0;
    uint64_t value = 0;
    uint64_t flag_address;
    char message[256];
    size_t n;

    memset(&desc, 0, sizeof desc);
    desc.WatchdogTimeoutMs = 5000;
    desc.Workers = 2;
    CHECK_HR(pipefence_device_create(&desc, &device), PIPEFENCE_S_OK);
    CHECK(device != NULL);
    CHECK_HR(pipefence_device_create(NULL, NULL), PIPEFENCE_E_POINTER);
    desc.Driver = 7;
    CHECK_HR(pipefence_device_create(&desc, &other), PIPEFENCE_E_INVALIDARG);
    CHECK(other == NULL);
    n = pipefence_last_error_message(message, sizeof message);
    CHECK(n > 0 && strstr(message, "Driver 7") != NULL);
    desc.Driver = PIPEFENCE_DRIVER_THREADED;
    desc.MemoryModel = PIPEFENCE_MEMORY_MODEL_STRICT; /* needs the deterministic driver */
    CHECK_HR(pipefence_device_create(&desc, &other), PIPEFENCE_E_INVALIDARG);

    CHECK_HR(pipefence_device_create_queue(device, PIPEFENCE_COMMAND_LIST_TYPE_DIRECT, "direct",
                                           &direct),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_create_queue(device, PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE, NULL,
                                           &compute),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_create_queue(device, 1, "bundle", &compute), PIPEFENCE_E_INVALIDARG);
    CHECK(compute == NULL);
    CHECK_HR(pipefence_device_create_queue(device, PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE, NULL,
                                           &compute),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_create_fence(device, 0, PIPEFENCE_FENCE_FLAG_NONE, "frame", &fence),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_create_buffer(device, 512, PIPEFENCE_HEAP_TYPE_SHARED, "flags",
                                            &flags),
             PIPEFENCE_S_OK);
    flag_address = pipefence_buffer_get_gpu_virtual_address(flags);
    CHECK(flag_address != 0);
    CHECK(pipefence_buffer_get_size(flags) == 512);

    /* The boundary: null, wrong kind, made up, released, another device. */
    CHECK_HR(pipefence_queue_signal(direct, NULL, 1), PIPEFENCE_E_POINTER);
    CHECK_HR(pipefence_queue_signal(direct, (PipefenceFence*)flags, 1), PIPEFENCE_E_INVALIDARG);
    pipefence_last_error_message(message, sizeof message);
    CHECK(strstr(message, "buffer handle, not a fence handle") != NULL);
    CHECK_HR(pipefence_queue_signal(direct, (PipefenceFence*)&desc, 1), PIPEFENCE_E_INVALIDARG);
    CHECK_HR(pipefence_device_create(NULL, &other), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_create_fence(other, 0, 0, "foreign", &foreign), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_queue_wait(direct, foreign, 1), PIPEFENCE_E_INVALIDARG);
    pipefence_last_error_message(message, sizeof message);
    CHECK(strstr(message, "another device") != NULL);
    CHECK(pipefence_fence_release(foreign) == 0);
    CHECK_HR(pipefence_fence_signal(foreign, 1), PIPEFENCE_E_INVALIDARG);
    CHECK(pipefence_fence_add_ref(foreign) == 0);
    CHECK(pipefence_device_release(other) == 0);
    CHECK(pipefence_buffer_get_gpu_virtual_address(NULL) == 0);
    CHECK(pipefence_fence_get_completed_value(NULL) == UINT64_MAX);

    /* A handshake: compute waits on a flag that direct raises after a fill. */
    CHECK_HR(pipefence_device_create_command_list(device, PIPEFENCE_COMMAND_LIST_TYPE_DIRECT,
                                                  "produce", &produce),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_create_command_list(device, PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE,
                                                  "consume", &consume),
             PIPEFENCE_S_OK);
    memset(&fill, 0, sizeof fill);
    fill.Type = PIPEFENCE_KERNEL_FILL;
    fill.Dst = flag_address + 16;
    fill.Value = 9;
    CHECK_HR(pipefence_list_set_kernel(produce, &fill), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_list_dispatch(produce, 1, 1, 1), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_list_write_value64_bottom_of_pipe(produce, flag_address, 1,
                                                         PIPEFENCE_FLUSH_BOP_TEXTURE_L2_WRITEBACK,
                                                         PIPEFENCE_WRITE_VALUE_FLAG_NONE),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_list_close(produce), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_list_wait_value64(consume, flag_address, 7 /* GREATER_EQUAL */, 1,
                                         UINT64_MAX, PIPEFENCE_WAIT_FLAG_SELECT_ENGINE_PFP),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_list_write_value32_bottom_of_pipe(consume, flag_address + 8, 2,
                                                         PIPEFENCE_FLUSH_NONE,
                                                         PIPEFENCE_WRITE_VALUE_FLAG_NONE),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_list_close(consume), PIPEFENCE_S_OK);
    lists[0] = consume;
    CHECK_HR(pipefence_queue_execute_command_lists(compute, 1, lists), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_queue_signal(compute, fence, 1), PIPEFENCE_S_OK);
    lists[0] = produce;
    CHECK_HR(pipefence_queue_execute_command_lists(direct, 1, lists), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_queue_execute_command_lists(direct, 0, lists), PIPEFENCE_E_INVALIDARG);
    CHECK_HR(pipefence_queue_execute_command_lists(direct, 1, NULL), PIPEFENCE_E_POINTER);
    CHECK_HR(pipefence_event_create(0, 0, &event), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_fence_set_event_on_completion(fence, 1, event), PIPEFENCE_S_OK);
    CHECK(pipefence_event_wait(event, 10000) == PIPEFENCE_WAIT_OBJECT_0);
    CHECK_HR(pipefence_buffer_read_u64(flags, 8, &value), PIPEFENCE_S_OK);
    CHECK(value == 2);
    CHECK_HR(pipefence_buffer_read_u64(flags, 16, &value), PIPEFENCE_S_OK);
    CHECK(value == ((uint64_t)9 << 32 | 9));
    CHECK_HR(pipefence_buffer_read_u64(flags, 16, NULL), PIPEFENCE_E_POINTER);

    /* A callback kernel. */
    {
        PipefenceCommandList* list = NULL;
        PIPEFENCE_KERNEL k;
        uint64_t base = flag_address + 384; /* past the fill above */
        uint32_t v = 0;
        memset(&k, 0, sizeof k);
        k.Type = PIPEFENCE_KERNEL_CALLBACK;
        k.Callback = count_groups;
        k.Context = &base;
        CHECK_HR(pipefence_device_create_command_list(device, PIPEFENCE_COMMAND_LIST_TYPE_COMPUTE,
                                                      "callback", &list),
                 PIPEFENCE_S_OK);
        CHECK_HR(pipefence_list_dispatch_kernel(list, &k, 5), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_list_close(list), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_queue_execute_command_lists(compute, 1, &list), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_queue_signal(compute, fence, 2), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_fence_wait(fence, 2, 10000), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_buffer_read_u64(flags, 384, &value), PIPEFENCE_S_OK);
        CHECK(value == 5);
        CHECK_HR(pipefence_buffer_read_u32(flags, 384 + 8 + 4 * 4, &v), PIPEFENCE_S_OK);
        CHECK(v == 5);
        k.Callback = NULL;
        CHECK_HR(pipefence_list_reset(list), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_list_dispatch_kernel(list, &k, 1), PIPEFENCE_S_OK);
        CHECK_HR(pipefence_list_close(list), PIPEFENCE_E_INVALIDARG);
        CHECK(pipefence_list_release(list) == 0);
    }

    /* A host thread (on the threaded driver, an ordinary thread). */
    CHECK_HR(pipefence_host_spawn(device, "producer", signal_from_host, fence, &host),
             PIPEFENCE_S_OK);
    CHECK_HR(pipefence_host_join(host, &result), PIPEFENCE_S_OK);
    CHECK_HR(result, PIPEFENCE_S_OK);
    CHECK(pipefence_fence_get_completed_value(fence) == 3);
    CHECK_HR(pipefence_host_join(host, &result), PIPEFENCE_DXGI_ERROR_INVALID_CALL);
    CHECK(pipefence_host_release(host) == 0);

    /* A short exploration. */
    {
        PIPEFENCE_EXPLORE_DESC explore;
        PipefenceExploreResult* r = NULL;
        int calls = 0;
        memset(&explore, 0, sizeof explore);
        explore.FirstSeed = 100;
        explore.Schedules = 5;
        CHECK_HR(pipefence_explore(&explore, schedule, &calls, &r), PIPEFENCE_S_OK);
        CHECK(calls == 5);
        CHECK(pipefence_explore_result_get_schedule_count(r) == 5);
        CHECK(pipefence_explore_result_get_failure_count(r) == 0);
        CHECK(pipefence_explore_result_release(r) == 0);
        CHECK_HR(pipefence_explore(&explore, NULL, &calls, &r), PIPEFENCE_E_POINTER);
    }

    CHECK_HR(pipefence_device_get_removed_reason(device), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_get_removal_report(device, PIPEFENCE_REPORT_FORMAT_TEXT, message,
                                                 sizeof message, NULL),
             PIPEFENCE_S_FALSE);
    CHECK(message[0] == 0);
    CHECK_HR(pipefence_device_remove(device), PIPEFENCE_S_OK);
    CHECK_HR(pipefence_device_get_removed_reason(device), PIPEFENCE_DXGI_ERROR_DEVICE_REMOVED);
    CHECK(pipefence_fence_get_completed_value(fence) == UINT64_MAX);

    CHECK(pipefence_event_release(event) == 0);
    CHECK(pipefence_list_release(consume) == 0);
    CHECK(pipefence_list_release(produce) == 0);
    CHECK(pipefence_buffer_release(flags) == 0);
    CHECK(pipefence_fence_release(fence) == 0);
    CHECK(pipefence_queue_release(compute) == 0);
    CHECK(pipefence_queue_release(direct) == 0);
    CHECK(pipefence_device_release(device) == 0);
    printf("c_api: ok\n");
    return 0;
}
