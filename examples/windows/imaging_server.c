/* The Wine demo's server (scripts/demo --wine): an imaging inference
 * server as it would run on the hospital's 3 GiB card, written as a plain
 * CUDA program: it calls only the Driver API and knows nothing of
 * vramshim.
 *
 *   - the model's weights are loaded once (--weights, in 64 MiB tensors);
 *   - each study is one request: activations sized by the study
 *     (--study, plus up to 50% more), written (their last MiB), read back,
 *     freed;
 *   - every --big-every studies a large study (--big) asks for much more:
 *     on the bare card it fits; under a tenant limit it is refused with
 *     CUDA_ERROR_OUT_OF_MEMORY, and the server reports it and goes on.
 *
 * It prints what cuMemGetInfo tells it (the card as it sees it) at start,
 * one line per study, and a summary; exit code 0 unless the driver failed
 * on something other than memory. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define MAX_TENSORS 256

static const char *human(unsigned long long b, char *buf)
{
    if (b >= GIB) snprintf(buf, 32, "%.2f GiB", (double)b / (double)GIB);
    else snprintf(buf, 32, "%.0f MiB", (double)b / (double)MIB);
    return buf;
}

static unsigned long long size_arg(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (strcmp(end, "GiB") == 0) v *= (double)GIB;
    else if (strcmp(end, "MiB") == 0) v *= (double)MIB;
    return (unsigned long long)v;
}

static const char *err(CUresult r)
{
    const char *name = "?";
    cuGetErrorName(r, &name);
    return name;
}

int main(int argc, char **argv)
{
    unsigned long long weights = 1200 * MIB, study = 256 * MIB, big = 1536 * MIB;
    int studies = 12, big_every = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--weights")) weights = size_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "--study")) study = size_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "--big")) big = size_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "--studies")) studies = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--big-every")) big_every = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: imaging_server [--weights SIZE] [--study SIZE] [--big SIZE] [--studies N] [--big-every N]\n");
            return 2;
        }
    }
    char a[32], b[32], c[32];
    CUdevice dev;
    CUcontext ctx;
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "server: the driver did not start: %s\n", err(r));
        return 1;
    }
    char name[128] = "?";
    cuDeviceGetName(name, sizeof name, dev);
    int vmm = 0;
    cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    size_t fr = 0, total = 0;
    cuMemGetInfo(&fr, &total);
    printf("server: card 0 \"%s\" (%s VMM): cuMemGetInfo says %s total, %s free\n", name, vmm ? "with" : "without",
           human(total, a), human(fr, b));

    /* the weights, once */
    CUdeviceptr w[MAX_TENSORS];
    int nw = 0;
    for (unsigned long long left = weights; left > 0 && nw < MAX_TENSORS; nw++) {
        size_t n = left > 64 * MIB ? 64 * MIB : (size_t)left;
        r = cuMemAlloc(&w[nw], n);
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "server: loading the weights failed at %s: %s\n", human(weights - left, a), err(r));
            return 1;
        }
        /* a slice of each tensor is written: under Wine every page the
         * sim's memory touches costs a fault, and the demo should be quick */
        cuMemsetD8(w[nw], (unsigned char)nw, n < MIB ? n : MIB);
        left -= n;
    }
    cuMemGetInfo(&fr, &total);
    printf("server: weights loaded: %s in %d tensors; %s free\n", human(weights, a), nw, human(fr, b));

    /* the studies */
    unsigned seed = 12345;
    int served = 0, refused = 0;
    unsigned char probe[16];
    for (int s = 1; s <= studies; s++) {
        seed = seed * 1103515245u + 12345u;
        int is_big = big_every > 0 && s % big_every == 0;
        size_t n = is_big ? (size_t)big : (size_t)(study + study * ((seed >> 8) % 50) / 100);
        CUdeviceptr act;
        r = cuMemAlloc(&act, n);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            cuMemGetInfo(&fr, &total);
            printf("server: study %2d needs %s: refused, out of memory (%s free of %s); the server goes on\n", s,
                   human(n, a), human(fr, b), human(total, c));
            refused++;
            continue;
        }
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "server: study %d: cuMemAlloc failed: %s\n", s, err(r));
            return 1;
        }
        cuMemsetD8(act + n - MIB, (unsigned char)s, MIB);   /* the last MiB: n >= 1 MiB */
        memset(probe, 0, sizeof probe);
        cuMemcpyDtoH(probe, act + n - sizeof probe, sizeof probe);
        cuMemFree(act);
        if (probe[0] != (unsigned char)s) {
            fprintf(stderr, "server: study %d read back the wrong bytes\n", s);
            return 1;
        }
        printf("server: study %2d served with %s of activations%s\n", s, human(n, a), is_big ? " (a large study)" : "");
        served++;
    }
    for (int i = 0; i < nw; i++) cuMemFree(w[i]);
    printf("server: done: %d studies served, %d refused for memory\n", served, refused);
    cuDevicePrimaryCtxRelease(dev);
    return 0;
}
