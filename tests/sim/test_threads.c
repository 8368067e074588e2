/* Many threads allocating and freeing through every path at once, each
 * block filled with a pattern unique to it and checked before it is freed:
 * an overlap between two live blocks, or a lost or double-counted charge,
 * fails the test. */
#include "sim_test.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 150
#define LIVE 6

static CUcontext ctx;

struct block {
    CUdeviceptr p;
    size_t n;
    int kind;                         /* 0 alloc, 1 pitch, 2 managed, 3 async, 4 vmm */
    CUmemGenericAllocationHandle h;
    uint32_t pattern;
};

static int fill_and_check(struct block *b, CUstream s, int check_only)
{
    size_t words = b->n / 4;
    uint32_t *buf = malloc(b->n);
    if (!buf) return -1;
    int bad = 0;
    if (!check_only) {
        if (cuMemsetD32Async(b->p, b->pattern, words, s) || cuStreamSynchronize(s)) bad = 1;
    } else {
        if (cuMemcpyDtoH(buf, b->p, words * 4)) bad = 2;
        for (size_t i = 0; !bad && i < words; i++)
            if (buf[i] != b->pattern) bad = 3;
    }
    free(buf);
    return bad;
}

static int make(struct block *b, unsigned *seed, CUstream s)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    size_t pitch;
    b->kind = (int)(rand_r(seed) % 5);
    b->n = 4 * (1 + rand_r(seed) % 20000);
    switch (b->kind) {
    case 0: return cuMemAlloc(&b->p, b->n);
    case 1:
        if (cuMemAllocPitch(&b->p, &pitch, b->n / 4, 4, 4)) return 1;
        b->n = pitch * 4;
        return 0;
    case 2: return cuMemAllocManaged(&b->p, b->n, CU_MEM_ATTACH_GLOBAL);
    case 3: return cuMemAllocAsync(&b->p, b->n, s);
    default:
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        b->n = 2 * MiB;
        if (cuMemAddressReserve(&b->p, b->n, 0, 0, 0) || cuMemCreate(&b->h, b->n, &prop, 0) ||
            cuMemMap(b->p, b->n, 0, b->h, 0))
            return 1;
        memset(&acc, 0, sizeof acc);
        acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        return cuMemSetAccess(b->p, b->n, &acc, 1);
    }
}

static int drop(struct block *b, CUstream s)
{
    switch (b->kind) {
    case 3: return cuMemFreeAsync(b->p, s);
    case 4: return cuMemUnmap(b->p, b->n) || cuMemRelease(b->h) || cuMemAddressFree(b->p, b->n);
    default: return cuMemFree(b->p);
    }
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    struct block live[LIVE];
    int nlive = 0;
    CUstream s;
    if (cuCtxSetCurrent(ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) return (void *)1;
    for (int r = 0; r < ROUNDS; r++) {
        if (nlive == LIVE || (nlive && rand_r(&seed) % 2)) {
            int i = (int)(rand_r(&seed) % (unsigned)nlive);
            if (fill_and_check(&live[i], s, 1)) return (void *)2;
            if (drop(&live[i], s)) return (void *)3;
            live[i] = live[--nlive];
        } else {
            struct block *b = &live[nlive];
            if (make(b, &seed, s)) return (void *)4;
            b->pattern = ((uint32_t)(uintptr_t)arg << 24) ^ (uint32_t)r ^ 0x5A5A0000u;
            if (fill_and_check(b, s, 0)) return (void *)5;
            nlive++;
        }
    }
    while (nlive) {
        if (fill_and_check(&live[nlive - 1], s, 1) || drop(&live[nlive - 1], s)) return (void *)6;
        nlive--;
    }
    if (cuStreamSynchronize(s) || cuStreamDestroy(s)) return (void *)7;
    return NULL;
}

static void threads_all_paths(void **state)
{
    (void)state;
    ctx = sim_test_setup(0);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        assert_int_equal((uintptr_t)rv, 0);
    }
    CU_OK(cuCtxSynchronize());
    assert_int_equal(vramsim_live_bytes(0), 0);
    assert_int_equal(vramsim_live_count(0), 0);
    assert_int_equal(vramsim_card_used(0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(threads_all_paths)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
