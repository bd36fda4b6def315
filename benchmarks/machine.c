/* Machine limits: FMA throughput and STREAM-like memory bandwidth.
 *
 * Build: gcc -O3 -march=native -fopenmp machine.c -o machine   (benchmarks/run.py does this)
 * Run:   OMP_NUM_THREADS=2 ./machine
 * Prints one JSON object per line: {"what": ..., "value": ..., "unit": ...}.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Limits are best cases: noise from other work on the machine only lowers a
 * repetition, so each figure is the best of several. */
static double best_rate(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static double min_time(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

/* ---------------------------------------------------------------- FMA peak
 * Each thread keeps CHAINS independent accumulators in registers and runs
 * acc = acc * x + y on all of them: CHAINS exceeds FMA latency x FMA pipes, so
 * the loop is bound by FMA throughput only. The empty asm statement keeps the
 * accumulators live in registers without adding instructions. */
#define CHAINS 12
#define FMA_KERNEL(NAME, LANES)                                                        \
    typedef float NAME##_v __attribute__((vector_size(4 * LANES)));                     \
    static double NAME(long iters) {                                                    \
        double t0 = 0, t1 = 0;                                                          \
        _Pragma("omp parallel")                                                         \
        {                                                                               \
            NAME##_v a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, x, y;            \
            for (int l = 0; l < LANES; l++) {                                           \
                x[l] = 1.0f - 1e-7f * (float)l;                                         \
                y[l] = 1e-6f;                                                           \
            }                                                                           \
            a0 = a1 = a2 = a3 = a4 = a5 = y;                                            \
            a6 = a7 = a8 = a9 = a10 = a11 = x;                                          \
            _Pragma("omp barrier")                                                      \
            _Pragma("omp master") t0 = now();                                           \
            for (long it = 0; it < iters; it++) {                                       \
                a0 = a0 * x + y; a1 = a1 * x + y; a2 = a2 * x + y; a3 = a3 * x + y;     \
                a4 = a4 * x + y; a5 = a5 * x + y; a6 = a6 * x + y; a7 = a7 * x + y;     \
                a8 = a8 * x + y; a9 = a9 * x + y; a10 = a10 * x + y; a11 = a11 * x + y; \
                __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3),           \
                                 "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));               \
                __asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));        \
            }                                                                           \
            _Pragma("omp barrier")                                                      \
            _Pragma("omp master") t1 = now();                                           \
            NAME##_v s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;   \
            volatile float sink = s[0];                                                 \
            (void)sink;                                                                 \
        }                                                                               \
        double flops = 2.0 * LANES * CHAINS * (double)iters * omp_get_max_threads();    \
        return flops / (t1 - t0) / 1e9;                                                 \
    }
FMA_KERNEL(fma256, 8)
#ifdef __AVX512F__
FMA_KERNEL(fma512, 16)
#else
/* no 512-bit registers on this machine: no 512-bit peak */
static double fma512(long iters) { (void)iters; return 0.0; }
#endif

/* ---------------------------------------------------------------- STREAM
 * copy: c[i] = a[i]; triad: a[i] = b[i] + s * c[i], float32, arrays much larger
 * than the last-level cache, first touched by the threads that use them.
 * Bytes counted as STREAM does: 2 arrays for copy, 3 for triad (write-allocate
 * traffic not counted). */
static void stream(long n, int reps, double *copy_gbs, double *triad_gbs) {
    float *a = aligned_alloc(64, (size_t)n * sizeof(float));
    float *b = aligned_alloc(64, (size_t)n * sizeof(float));
    float *c = aligned_alloc(64, (size_t)n * sizeof(float));
    if (!a || !b || !c) {
        fprintf(stderr, "machine: out of memory\n");
        exit(1);
    }
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 1.0f;
        b[i] = 2.0f;
        c[i] = 0.0f;
    }
    double *tc = malloc(sizeof(double) * (size_t)reps), *tt = malloc(sizeof(double) * (size_t)reps);
    const float s = 3.0f;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) c[i] = a[i];
        double t1 = now();
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double t2 = now();
        tc[r] = t1 - t0;
        tt[r] = t2 - t1;
    }
    *copy_gbs = 2.0 * 4.0 * (double)n / min_time(tc, reps) / 1e9;
    *triad_gbs = 3.0 * 4.0 * (double)n / min_time(tt, reps) / 1e9;
    volatile float sink = a[n / 2];
    (void)sink;
    free(a); free(b); free(c); free(tc); free(tt);
}

int main(int argc, char **argv) {
    long fma_iters = argc > 1 ? atol(argv[1]) : 50000000L;
    long n = argc > 2 ? atol(argv[2]) : 64L << 20;  /* 64 Mi floats: 256 MB per array */
    int reps = 11;
    double f256[5], f512[5];
    fma256(fma_iters / 10);  /* warm up: clocks and thread pool */
    for (int r = 0; r < 5; r++) {
        f256[r] = fma256(fma_iters);
        f512[r] = fma512(fma_iters / 2);
    }
    double copy, triad;
    stream(n, reps, &copy, &triad);
    printf("{\"what\": \"fma256\", \"value\": %.2f, \"unit\": \"GFLOP/s\"}\n", best_rate(f256, 5));
    printf("{\"what\": \"fma512\", \"value\": %.2f, \"unit\": \"GFLOP/s\"}\n", best_rate(f512, 5));
    printf("{\"what\": \"copy\", \"value\": %.2f, \"unit\": \"GB/s\"}\n", copy);
    printf("{\"what\": \"triad\", \"value\": %.2f, \"unit\": \"GB/s\"}\n", triad);
    printf("{\"what\": \"threads\", \"value\": %d, \"unit\": \"\"}\n", omp_get_max_threads());
    return 0;
}
