/* A stand-in libnvidia-ml.so for draguard's tests: the few NVML symbols pynvml calls in
 * draguard.harness.devices.probe, with the signatures of nvml.h (NVIDIA Management Library).
 * Two GPUs by default (DRAGUARD_STUB_NVML_GPUS=N changes the count): GPU 0 runs one compute
 * process; GPU 1 has MIG on, with two MIG devices, one of them running a process.
 * Built by tests/devices/test_probe.py with the machine's C compiler. */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;

struct nvmlDevice_st { const char *name; const char *uuid; unsigned long long total; int nproc; unsigned int pid;
                       unsigned long long procmem; int mig; struct nvmlDevice_st *migs[2]; };
typedef struct nvmlDevice_st *nvmlDevice_t;

static struct nvmlDevice_st mig0 = {"NVIDIA A100-SXM4-80GB MIG 3g.40gb", "MIG-11111111-2222-3333-4444-555555555555",
                                    40ULL << 30, 1, 7001, 2ULL << 30, 0, {0, 0}};
static struct nvmlDevice_st mig1 = {"NVIDIA A100-SXM4-80GB MIG 3g.40gb", "MIG-66666666-7777-8888-9999-000000000000",
                                    40ULL << 30, 0, 0, 0, 0, {0, 0}};
static struct nvmlDevice_st gpus[2] = {
    {"NVIDIA H100 80GB HBM3", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 80ULL << 30, 1, 4242, 1ULL << 30, 0, {0, 0}},
    {"NVIDIA A100-SXM4-80GB", "GPU-ffffffff-0000-1111-2222-333333333333", 80ULL << 30, 0, 0, 0, 1, {&mig0, &mig1}},
};
static int initialised = 0;

static unsigned int count(void) {
    const char *n = getenv("DRAGUARD_STUB_NVML_GPUS");
    int c = n ? atoi(n) : 2;
    return c < 0 ? 0 : (c > 2 ? 2 : (unsigned int)c);
}

static nvmlReturn_t copy(const char *s, char *buf, unsigned int len) {
    if (!buf || strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buf, s);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; initialised = 1; return NVML_SUCCESS; }
nvmlReturn_t nvmlInit_v2(void) { initialised = 1; return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown(void) { initialised = 0; return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) { return copy("580.65.06-stub", v, len); }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *c = count();
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (i >= count()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &gpus[i];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *b, unsigned int len) { return copy(d->name, b, len); }
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *b, unsigned int len) { return copy(d->uuid, b, len); }
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    m->total = d->total;
    m->used = d->nproc ? d->procmem : 0;
    if (d->mig) m->used = mig0.procmem;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    unsigned int have = (unsigned int)d->nproc;
    if (have == 0) { *n = 0; return NVML_SUCCESS; }
    if (!p || *n < have) { *n = have; return NVML_ERROR_INSUFFICIENT_SIZE; }
    p[0].pid = d->pid;
    p[0].usedGpuMemory = d->procmem;
    p[0].gpuInstanceId = 0xFFFFFFFF;
    p[0].computeInstanceId = 0xFFFFFFFF;
    *n = have;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    if (d == &mig0 || d == &mig1) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)d->mig;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *c) { *c = d->mig ? 7 : 0; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int i, nvmlDevice_t *m) {
    if (!d->mig) return NVML_ERROR_NOT_SUPPORTED;
    if (i >= 2) return NVML_ERROR_NOT_FOUND;
    *m = d->migs[i];
    return NVML_SUCCESS;
}
