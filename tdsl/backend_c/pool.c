/* tdsl's thread pool: the runtime of the parallel loops of host C and LLVM kernels.

   int tdsl_parallel_for(tdsl_task fn, void *env, int64_t lo, int64_t hi)

   runs fn(a, b, env) on chunks [a, b) that together cover [lo, hi) once each, and
   returns 0, or the first nonzero value a chunk returned (no chunk starts after a
   failed one). The calling thread takes part; the pool's workers take chunks from a
   shared counter while it has any (chunks of trips / (CHUNKS_PER_THREAD * threads)
   iterations, then, over about the last 2 * threads chunks' worth, chunks halving in
   size down to single iterations, so that threads that run at the same speed finish
   within about one iteration of each other: plan_chunks). The
   call returns when every chunk that was taken has finished: it never waits for a
   thread that holds no work, so a worker the system has descheduled, or one that
   wakes late, costs at most the chunk it holds.

   Idle workers spin for SPIN_NS, then sleep (a futex on Linux, else a condition
   variable): a kernel with many parallel loops in a row finds them awake, and a
   machine with other work gets its cores back within that time.

   Two threads of one loop on one CPU: when the machine has more runnable threads
   than cores (another process computing beside the kernel), the system can leave a
   worker on the CPU of the thread that called the loop, the two taking turns while
   the competitor has a core to itself; the loop then runs at the speed of one thread
   and needs 2x its time on a 2-core machine, where a fair share of the machine would
   cost 1.5x. On Linux each thread running a chunk counts itself on its CPU
   (`on_cpu`); a worker that is about to run a chunk on a CPU where another thread of
   the pool's loops runs moves to a CPU where none does, if its affinity allows one
   (it sets its affinity to those CPUs, then back: the system may move it again
   later, and then it moves again). At most once per MOVE_NS per worker.

   How many threads a call uses: at most the calling thread's setting
   (tdsl_set_num_threads, 0 meaning the process default of tdsl_configure), the
   caller included; and a worker joins a loop only while fewer threads than the
   machine's cores run kernel work (callers inside tdsl_parallel_for and workers
   inside a loop), or than the call asked for if that is more. So several threads
   calling kernels at once (a Dask worker's) share the pool's workers and never run
   more than max(callers, cores) threads of kernel work between them; and the pool
   never holds more workers than the most threads one call asked for, less one.

   Concurrent calls each take a slot (SLOTS of them; with none free a call runs
   serially); a slot's state word holds its generation (odd while the loop is open),
   the seats left for workers and the next chunk, so that a worker claims a chunk
   with one compare-and-swap that fails when the slot has moved on to another loop.
   A parallel loop inside a chunk (which tdsl's outline pass never emits) runs as a
   loop of its own, on its own slot. After fork() the child starts with no workers.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

typedef int (*tdsl_task)(int64_t lo, int64_t hi, void *env);

#define SLOTS 64
#define MAX_THREADS 256             /* per call; the seats left fit in 8 bits */
#define CHUNK_BITS 24
#define CHUNK_MASK ((1u << CHUNK_BITS) - 1)
#define CHUNKS_PER_THREAD 8         /* lower.abi.CHUNKS_PER_THREAD */
#define SPIN_NS 50000               /* an idle worker spins this long, then sleeps */
#define WAIT_SPIN_NS 20000          /* a caller waiting for chunks in flight, likewise */
#define MOVE_NS 1000000             /* a worker moves off a shared CPU at most this often */
#define CPU_SLOTS 256               /* CPUs counted in on_cpu (a CPU beyond: not counted) */

struct slot {
    _Alignas(64) _Atomic uint64_t state;  /* generation:32 | seats:8 | next chunk:24 */
    _Atomic(tdsl_task) fn;
    _Atomic(void *) env;
    _Atomic int64_t lo, hi, chunk;
    _Atomic uint32_t head;       /* chunks of `chunk` iterations, before the rest */
    _Atomic uint32_t chunks;     /* how many in all */
    _Atomic int64_t rest, tail_div;  /* plan_chunks */
    _Atomic uint32_t limit;      /* threads that may run kernel work while it is open */
    _Atomic uint32_t finished;   /* chunks run or cancelled (the caller sleeps on it) */
    _Atomic uint32_t sleeping;   /* the caller sleeps */
    _Atomic int failed;
};

static struct {
    struct slot slots[SLOTS];
    _Atomic uint64_t free;       /* bit k: slot k is free */
    _Atomic uint64_t open;       /* bit k: slot k holds a loop that may have chunks left */
    _Atomic uint32_t epoch;      /* bumped for each loop opened (idle workers sleep on it) */
    _Atomic int idle;            /* workers asleep or about to be */
    _Atomic int busy;            /* threads running kernel work */
    _Atomic int workers;
    _Atomic int64_t loops, helped, serial, moved;  /* statistics */
    int default_threads, cores;
    pthread_mutex_t lock;        /* creating workers */
} pool = {.free = ~(uint64_t)0, .default_threads = 1, .cores = 1,
          .lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int thread_setting;  /* tdsl_set_num_threads; 0: the default */

/* ------------------------------------------------------------ CPUs */

#if defined(__linux__)
/* threads running a chunk on each CPU, as sched_getcpu() said when they started it */
static struct {
    _Alignas(64) _Atomic int n;
} on_cpu[CPU_SLOTS];

static _Thread_local int64_t last_move;  /* when this worker last moved (now_ns) */

static int enter_cpu(void) {
    int cpu = sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SLOTS)
        return -1;
    atomic_fetch_add_explicit(&on_cpu[cpu].n, 1, memory_order_relaxed);
    return cpu;
}

static void leave_cpu(int cpu) {
    if (cpu >= 0)
        atomic_fetch_sub_explicit(&on_cpu[cpu].n, 1, memory_order_relaxed);
}

static int64_t now_ns(void);

/* A worker counted on `cpu` (enter_cpu) before running a chunk: when another thread
   runs a chunk there too, move to a CPU of its affinity where none does, if there is
   one; returns the CPU it is counted on afterwards. */
static int spread(int cpu) {
    if (cpu < 0 || atomic_load_explicit(&on_cpu[cpu].n, memory_order_relaxed) < 2)
        return cpu;
    int64_t t = now_ns();
    if (t - last_move < MOVE_NS)
        return cpu;
    last_move = t;
    cpu_set_t allowed, open_cpus;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return cpu;
    CPU_ZERO(&open_cpus);
    for (int c = 0; c < CPU_SLOTS; c++)
        if (CPU_ISSET(c, &allowed) && atomic_load_explicit(&on_cpu[c].n, memory_order_relaxed) == 0)
            CPU_SET(c, &open_cpus);
    if (CPU_COUNT(&open_cpus) == 0 || sched_setaffinity(0, sizeof open_cpus, &open_cpus) != 0)
        return cpu;
    sched_setaffinity(0, sizeof allowed, &allowed);  /* on a free CPU now; free to move again */
    atomic_fetch_add_explicit(&pool.moved, 1, memory_order_relaxed);
    leave_cpu(cpu);
    return enter_cpu();
}
#else
static int enter_cpu(void) { return -1; }
static void leave_cpu(int cpu) { (void)cpu; }
static int spread(int cpu) { return cpu; }
#endif

/* ------------------------------------------------------------ waiting */

#if defined(__linux__)
static void wait32(_Atomic uint32_t *word, uint32_t seen) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void wake32(_Atomic uint32_t *word, int n) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}
#else
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wait_cond = PTHREAD_COND_INITIALIZER;

static void wait32(_Atomic uint32_t *word, uint32_t seen) {
    pthread_mutex_lock(&wait_lock);
    if (atomic_load(word) == seen) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 1000000;  /* a bounded sleep: a missed broadcast costs 1 ms at most */
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec += 1;
            t.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&wait_cond, &wait_lock, &t);
    }
    pthread_mutex_unlock(&wait_lock);
}

static void wake32(_Atomic uint32_t *word, int n) {
    (void)word;
    (void)n;
    pthread_mutex_lock(&wait_lock);
    pthread_cond_broadcast(&wait_cond);
    pthread_mutex_unlock(&wait_lock);
}
#endif

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ------------------------------------------------------------ chunks */

#define GEN(state) ((uint32_t)((state) >> 32))
#define SEATS(state) ((uint32_t)((state) >> CHUNK_BITS) & 0xffu)
#define NEXT(state) ((uint32_t)(state) & CHUNK_MASK)

/* How a loop of `trips` iterations on `n` threads is cut: `head` chunks of `chunk`
   iterations (c = trips / (CHUNKS_PER_THREAD * n)), one chunk of the `rest` (< c, when
   there is one), then a tail of smaller chunks: 2n of c/2, 2n of c/4, ... down to 2n of
   2, and 2n single iterations last. Equal chunks leave the thread that takes the last
   one alone for up to a chunk (56 rows in 19 chunks of 3 on 2 threads: 10 chunks
   against 9, 7% of the loop); halving ones for about an iteration. No chunk is larger
   than c, and chunk k's bounds take O(log c) steps to find. Returns the number of
   chunks. */
static uint32_t plan_chunks(int64_t trips, int n, int64_t *chunk, uint32_t *head,
                            int64_t *rest, int64_t *div) {
    int64_t c = trips / ((int64_t)CHUNKS_PER_THREAD * n);
    if (c < 1)
        c = 1;
    if ((trips + c - 1) / c > (int64_t)CHUNK_MASK / 2)
        c = (trips + CHUNK_MASK / 2 - 1) / (CHUNK_MASK / 2);
    int64_t d = 2 * (int64_t)n, tail = d;
    for (int64_t s = c >> 1; s > 1; s >>= 1)
        tail += d * s;
    int64_t h = trips > tail ? (trips - tail) / c : 0;
    int64_t r = trips > tail ? trips - tail - h * c : 0;
    uint32_t count = (uint32_t)h + (r > 0);
    int64_t left = trips - h * c - r;
    for (int64_t s = c >> 1; s > 1; s >>= 1) {
        int64_t k = left / s < d ? left / s : d;
        count += (uint32_t)k;
        left -= k * s;
    }
    *chunk = c;
    *head = (uint32_t)h;
    *rest = r;
    *div = d;
    return count + (uint32_t)left;
}

/* Iterations [*a, *b) of chunk k of a loop over [lo, hi) cut by plan_chunks. */
static void chunk_bounds(int64_t lo, int64_t hi, int64_t chunk, uint32_t head, int64_t rest,
                         int64_t div, uint32_t k, int64_t *a, int64_t *b) {
    if (k < head) {
        *a = lo + (int64_t)k * chunk;
        *b = *a + chunk;
        return;
    }
    int64_t start = lo + (int64_t)head * chunk, j = (int64_t)(k - head);
    if (rest > 0) {
        if (j == 0) {
            *a = start;
            *b = start + rest;
            return;
        }
        start += rest;
        j--;
    }
    int64_t left = hi - start;
    for (int64_t s = chunk >> 1; s > 1; s >>= 1) {
        int64_t m = left / s < div ? left / s : div;
        if (j < m) {
            *a = start + j * s;
            *b = *a + s;
            return;
        }
        start += m * s;
        left -= m * s;
        j -= m;
    }
    *a = start + j;
    *b = *a + 1;
}

/* Run chunk k of the loop in slot s (whose fields the caller has read), count it
   finished and wake the loop's caller when it was the last. */
static void run_chunk(struct slot *s, tdsl_task fn, void *env, int64_t lo, int64_t hi,
                      int64_t chunk, uint32_t head, int64_t rest, int64_t div, uint32_t chunks,
                      uint32_t k, int is_worker) {
    int64_t a, b;
    chunk_bounds(lo, hi, chunk, head, rest, div, k, &a, &b);
    uint32_t done = 1;
    int cpu = enter_cpu();
    if (is_worker)
        cpu = spread(cpu);
    int status = atomic_load_explicit(&s->failed, memory_order_relaxed) ? 0 : fn(a, b, env);
    leave_cpu(cpu);
    if (status != 0) {
        int none = 0;
        atomic_compare_exchange_strong(&s->failed, &none, status);
        /* cancel the chunks nobody has taken: take them all at once */
        uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);
        while (NEXT(st) < chunks) {
            uint64_t all = (st & ~(uint64_t)CHUNK_MASK) | chunks;
            if (atomic_compare_exchange_weak(&s->state, &st, all)) {
                done += chunks - NEXT(st);
                break;
            }
        }
    }
    if (atomic_fetch_add(&s->finished, done) + done == chunks && atomic_load(&s->sleeping))
        wake32(&s->finished, 1);
}

/* A worker's turn at slot s: join the loop it holds if it has a seat and chunks left
   and the machine a core to spare, and run chunks until none is left. Returns
   whether it ran any. */
static int help(struct slot *s) {
    uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);
    if (!(GEN(st) & 1) || SEATS(st) == 0)
        return 0;
    /* the fields of this loop: the compare-and-swap below fails if the slot has
       moved on since `st` was read */
    tdsl_task fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
    void *env = atomic_load_explicit(&s->env, memory_order_relaxed);
    int64_t lo = atomic_load_explicit(&s->lo, memory_order_relaxed);
    int64_t hi = atomic_load_explicit(&s->hi, memory_order_relaxed);
    int64_t chunk = atomic_load_explicit(&s->chunk, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
    int64_t rest = atomic_load_explicit(&s->rest, memory_order_relaxed);
    int64_t div = atomic_load_explicit(&s->tail_div, memory_order_relaxed);
    uint32_t chunks = atomic_load_explicit(&s->chunks, memory_order_relaxed);
    int limit = (int)atomic_load_explicit(&s->limit, memory_order_relaxed);
    int busy = atomic_load(&pool.busy);
    do {
        if (busy >= limit)
            return 0;
    } while (!atomic_compare_exchange_weak(&pool.busy, &busy, busy + 1));
    uint32_t gen = GEN(st);
    int joined = 0, ran = 0;
    for (;;) {
        if (GEN(st) != gen || NEXT(st) >= chunks || (!joined && SEATS(st) == 0))
            break;
        uint64_t want = joined ? st + 1 : st - ((uint64_t)1 << CHUNK_BITS) + 1;
        if (!atomic_compare_exchange_weak_explicit(&s->state, &st, want, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        joined = 1;
        run_chunk(s, fn, env, lo, hi, chunk, head, rest, div, chunks, NEXT(st), 1);
        ran++;
        st = atomic_load_explicit(&s->state, memory_order_acquire);
    }
    atomic_fetch_sub(&pool.busy, 1);
    if (ran)
        atomic_fetch_add_explicit(&pool.helped, 1, memory_order_relaxed);
    return ran;
}

/* One pass over the open loops; whether any chunk ran. */
static int find_work(void) {
    uint64_t open = atomic_load(&pool.open);
    int ran = 0;
    while (open) {
        int k = __builtin_ctzll(open);
        open &= open - 1;
        ran |= help(&pool.slots[k]);
    }
    return ran;
}

static void *worker(void *unused) {
    (void)unused;
    for (;;) {
        if (find_work())
            continue;
        int64_t until = now_ns() + SPIN_NS;
        int found = 0;
        for (int n = 1; !found; n++) {
            CPU_RELAX();
            if (atomic_load_explicit(&pool.open, memory_order_relaxed))
                found = find_work();
            if ((n & 63) == 0 && now_ns() > until)
                break;
        }
        if (found)
            continue;
        uint32_t seen = atomic_load(&pool.epoch);
        atomic_fetch_add(&pool.idle, 1);
        if (!find_work())
            wait32(&pool.epoch, seen);
        atomic_fetch_sub(&pool.idle, 1);
    }
    return NULL;
}

/* At least `want` workers (as many as could be started); how many there are. */
static int ensure_workers(int want) {
    if (atomic_load_explicit(&pool.workers, memory_order_acquire) >= want)
        return want;
    pthread_mutex_lock(&pool.lock);
    int have = atomic_load(&pool.workers);
    if (have < want) {
        sigset_t all, before;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &before);  /* signals stay with the caller's threads */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        for (; have < want; have++) {
            pthread_t t;
            if (pthread_create(&t, &attr, worker, NULL) != 0)
                break;
        }
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &before, NULL);
        atomic_store_explicit(&pool.workers, have, memory_order_release);
    }
    pthread_mutex_unlock(&pool.lock);
    return have;
}

/* ------------------------------------------------------------ the entry points */

int tdsl_parallel_for(tdsl_task fn, void *env, int64_t lo, int64_t hi) {
    if (hi <= lo)
        return 0;
    int64_t trips = hi - lo;
    int n = thread_setting ? thread_setting : pool.default_threads;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    if ((int64_t)n > trips)
        n = (int)trips;
    if (n <= 1 || ensure_workers(n - 1) == 0)
        return fn(lo, hi, env);
    /* a free slot */
    uint64_t free = atomic_load(&pool.free);
    int k;
    do {
        if (free == 0) {
            atomic_fetch_add_explicit(&pool.serial, 1, memory_order_relaxed);
            return fn(lo, hi, env);
        }
        k = __builtin_ctzll(free);
    } while (!atomic_compare_exchange_weak(&pool.free, &free, free & ~((uint64_t)1 << k)));
    struct slot *s = &pool.slots[k];
    int64_t chunk, rest, div;
    uint32_t head;
    uint32_t chunks = plan_chunks(trips, n, &chunk, &head, &rest, &div);
    atomic_store_explicit(&s->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&s->env, env, memory_order_relaxed);
    atomic_store_explicit(&s->lo, lo, memory_order_relaxed);
    atomic_store_explicit(&s->hi, hi, memory_order_relaxed);
    atomic_store_explicit(&s->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&s->head, head, memory_order_relaxed);
    atomic_store_explicit(&s->rest, rest, memory_order_relaxed);
    atomic_store_explicit(&s->tail_div, div, memory_order_relaxed);
    atomic_store_explicit(&s->chunks, chunks, memory_order_relaxed);
    atomic_store_explicit(&s->limit, (uint32_t)(n > pool.cores ? n : pool.cores),
                          memory_order_relaxed);
    atomic_store_explicit(&s->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&s->sleeping, 0, memory_order_relaxed);
    atomic_store_explicit(&s->failed, 0, memory_order_relaxed);
    uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
    uint32_t gen = GEN(st) + 1;  /* odd: open */
    st = ((uint64_t)gen << 32) | ((uint64_t)(n - 1) << CHUNK_BITS);
    atomic_store_explicit(&s->state, st, memory_order_release);
    atomic_fetch_or(&pool.open, (uint64_t)1 << k);
    atomic_fetch_add(&pool.busy, 1);
    atomic_fetch_add_explicit(&pool.loops, 1, memory_order_relaxed);
    atomic_fetch_add(&pool.epoch, 1);
    int idle = atomic_load(&pool.idle);
    if (idle > 0)
        wake32(&pool.epoch, idle < n - 1 ? idle : n - 1);
    /* the caller's share: chunks until none is left */
    for (;;) {
        if (NEXT(st) >= chunks)
            break;
        if (!atomic_compare_exchange_weak_explicit(&s->state, &st, st + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        run_chunk(s, fn, env, lo, hi, chunk, head, rest, div, chunks, NEXT(st), 0);
        st = atomic_load_explicit(&s->state, memory_order_acquire);
    }
    atomic_fetch_and(&pool.open, ~((uint64_t)1 << k));
    atomic_fetch_sub(&pool.busy, 1);
    /* the chunks workers still run */
    if (atomic_load(&s->finished) != chunks) {
        int64_t until = now_ns() + WAIT_SPIN_NS;
        for (int m = 1; atomic_load(&s->finished) != chunks; m++) {
            CPU_RELAX();
            if ((m & 63) == 0 && now_ns() > until)
                break;
        }
        atomic_store(&s->sleeping, 1);
        for (uint32_t f; (f = atomic_load(&s->finished)) != chunks;)
            wait32(&s->finished, f);
    }
    int status = atomic_load(&s->failed);
    atomic_store_explicit(&s->state, (uint64_t)(gen + 1) << 32, memory_order_release);
    atomic_fetch_or(&pool.free, (uint64_t)1 << k);
    return status;
}

/* The chunks a loop of `trips` iterations on `n` threads is cut into, for tests: up
   to `max` pairs (start, end) into `bounds`; returns how many chunks there are. */
int64_t tdsl_pool_chunks(int64_t trips, int n, int64_t *bounds, int64_t max) {
    int64_t chunk, rest, div;
    uint32_t head;
    uint32_t chunks = trips > 0 && n > 0 ? plan_chunks(trips, n, &chunk, &head, &rest, &div) : 0;
    for (uint32_t k = 0; k < chunks && k < max; k++)
        chunk_bounds(0, trips, chunk, head, rest, div, k, &bounds[2 * k], &bounds[2 * k + 1]);
    return chunks;
}

/* The calling thread's number of threads for the loops it starts (0: the default). */
void tdsl_set_num_threads(int n) {
    thread_setting = n < 0 ? 0 : n > MAX_THREADS ? MAX_THREADS : n;
}

/* The calling thread's setting (0: none, the default applies). */
int tdsl_thread_setting(void) {
    return thread_setting;
}

/* How many threads the loops the calling thread starts may use, itself included. */
int tdsl_num_threads(void) {
    return thread_setting ? thread_setting : pool.default_threads;
}

static void forget_workers(void) {  /* in a child after fork(): the workers are gone */
    pthread_mutex_init(&pool.lock, NULL);
    atomic_store(&pool.workers, 0);
    atomic_store(&pool.idle, 0);
    atomic_store(&pool.busy, 0);
    atomic_store(&pool.open, 0);
    atomic_store(&pool.free, ~(uint64_t)0);
    for (int k = 0; k < SLOTS; k++) {
        uint64_t st = atomic_load(&pool.slots[k].state);
        atomic_store(&pool.slots[k].state, (uint64_t)((GEN(st) | 1) + 1) << 32);
    }
}

static void lock_pool(void) { pthread_mutex_lock(&pool.lock); }

static void unlock_pool(void) { pthread_mutex_unlock(&pool.lock); }

/* The process default of threads per call and the machine's cores; called once. */
void tdsl_configure(int default_threads, int cores) {
    static int registered;
    pool.default_threads = default_threads < 1 ? 1 : default_threads > MAX_THREADS ? MAX_THREADS
                                                                                  : default_threads;
    pool.cores = cores < 1 ? 1 : cores;
    if (!registered) {
        registered = 1;
        pthread_atfork(lock_pool, unlock_pool, forget_workers);
    }
}

/* The check a worker makes before each chunk, made by the calling thread as if
   `others` more threads of the pool ran chunks on its CPU: moves it to a CPU where none
   does if its affinity allows one (and it has not moved in the last MOVE_NS). Returns
   the CPU it runs on afterwards; -1 where CPUs are not counted (not Linux). */
int tdsl_pool_spread(int others) {
#if defined(__linux__)
    int cpu = enter_cpu();
    if (cpu < 0)
        return -1;
    atomic_fetch_add_explicit(&on_cpu[cpu].n, others, memory_order_relaxed);
    int before = cpu;
    cpu = spread(cpu);
    atomic_fetch_sub_explicit(&on_cpu[before].n, others, memory_order_relaxed);
    leave_cpu(cpu);
    return sched_getcpu();
#else
    (void)others;
    return -1;
#endif
}

/* Workers started, loops run on the pool, (worker, loop) pairs that ran chunks, loops
   run serially for want of a free slot, and moves of a worker off a shared CPU. */
void tdsl_pool_stats(int64_t out[5]) {
    out[0] = atomic_load(&pool.workers);
    out[1] = atomic_load(&pool.loops);
    out[2] = atomic_load(&pool.helped);
    out[3] = atomic_load(&pool.serial);
    out[4] = atomic_load(&pool.moved);
}
