/* The CPU target's grid runner: blocks on every core, and a block's threads as fibers where they synchronize.
 *
 * Compiled kernel code (numba, see overdub/targets/cpu.py and cpu_sync.py) reaches these functions through
 * external symbols that cpu_sync.py registers with LLVM at the addresses symbols() below gives (so code loaded
 * from the disk cache calls this process's runner); nothing here touches Python objects, so a grid runs
 * without the GIL. The runner calls compiled grid bodies by the address the launch passes.
 *
 * od_run(mode, ...) runs one grid on a pool of worker threads (the calling thread is one of them):
 *   mode 0, the grid loop: workers take chunks of blocks; for each row of threads of the chunk's blocks (the
 *           blocks sharing a y and z block index, and a thread y and z index) they call the compiled row loop
 *           (the kernel inlined into a loop over the row's global x indices);
 *   mode 3, block rows: as mode 0, a row of each block at a time (for kernels reading threadIdx.x or
 *           blockIdx.x on their own, which the row loop sets exactly only within one block);
 *   mode 1, block fibers: workers take blocks one at a time and run each thread of the block as a fiber (its
 *           own stack, switched to in user mode, as large as the launch says -- the kernel's local arrays plus a
 *           margin -- above a guard region); a barrier saves the fiber and switches to the next one, and
 *           when every live thread of the block has arrived, the block continues;
 *   mode 2, grid fibers (kernels using cuda.cg.this_grid().sync()): worker w runs blocks w, w+W, ... all at
 *           once as fibers, so every block of the grid is resident; a grid barrier is a barrier over the
 *           worker's fibers followed by a rendezvous of the workers;
 *   mode 4, block regions: workers take blocks one at a time; the grid body is the kernel cut at its barriers
 *           (overdub/targets/cpu/regions.py): called for a thread, it runs from where the thread stands to its
 *           next barrier (or finishes), its values live across barriers kept in the thread's frame (`stack`
 *           bytes a thread, at the launch); a compiled pass runs the block's threads in turn, a pass per
 *           region, until every thread is done -- no stack and no switch per thread.
 * A mode plus RAISE_ENDS_THREAD (a launch without debug) makes an exception end its thread alone, as CUDA
 * without debug does (the grid goes on; a kernel that may raise runs its threads as fibers for that); without
 * it, the first exception stops the grid and reaches the launch.
 * Threads that exited count as arrived at every barrier (CUDA's bar.sync does the same), so a block whose
 * threads return early still synchronizes; threads waiting at different kinds of barrier (a warp operation
 * against __syncthreads) are a deadlock, reported as an error instead of a hang.
 *
 * The compiled functions called here use numba's calling convention (an admitted dependency on numba's
 * internals, the same one cpu_sync.py states): int32 f(void *retptr, void **excinfo, void *args, int64 first,
 * int64 end, int64 row) -- a row loop runs the x indices [first, end) of row `row`; a thread body ignores
 * them -- returning 0 or -2 on success, else an error code whose exception info the launch re-raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(OVERDUB_UCONTEXT)
#define OVERDUB_ASM_SWITCH 1
#else
#include <ucontext.h>       /* other machines (and builds with -DOVERDUB_UCONTEXT): slower, portable */
#endif

typedef int32_t (*compiled_fn)(void *retptr, void **excinfo, void *args, int64_t first, int64_t end, int64_t row);

enum { READY, WAIT_BLOCK, WAIT_WARP, WAIT_GRID, DONE };
enum { OK = 0, KERNEL_ERROR = 1, RUNTIME_ERROR = 2 };
#define GUARD_SIZE (64 * 1024)      /* below each fiber stack, no access: an overflow faults, never corrupts */
#define MAX_SITES 64
#define RAISE_ENDS_THREAD 8         /* added to a mode: a thread raising an exception ends, the grid goes on */
#define MAX_RESIDENT_THREADS (1 << 20)  /* grid fibers: every thread of the grid at once, a stack each */
#define NO_SHARED 0x4f440001        /* block regions: a pass's status when a shared array could not be had (the grid
                                     * has failed and stops; numba's statuses are 0, -1, -2, -3 and small exception
                                     * numbers); regions.py names it too */
#define FRAME_ALIGN 64

/* --- context switching ------------------------------------------------------------------------------- */

#if defined(OVERDUB_ASM_SWITCH)
/* overdub_fiber_switch(&from->sp, to->sp): save the callee-saved registers on this stack, store the stack
 * pointer, load the other one, restore its registers and return into it (System V AMD64). The FP control
 * words (MXCSR, x87) are not switched: every fiber of a worker shares them, and compiled kernels never change
 * them. */
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".hidden overdub_fiber_switch\n"
    ".globl overdub_fiber_switch\n"
    "overdub_fiber_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n");
void overdub_fiber_switch(void **from, void *to);

typedef struct { void *sp; } context;

static void fiber_start(void);

static void context_make(context *c, char *stack, size_t size) {
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + size)) & ~(uintptr_t)15);
    uint64_t *sp = top - 2;             /* after `ret` pops the entry, rsp = top - 8: a call's alignment */
    *sp = (uint64_t)(uintptr_t)fiber_start;
    sp -= 6;                            /* rbp rbx r12 r13 r14 r15, all zero */
    memset(sp, 0, 6 * sizeof(uint64_t));
    c->sp = sp;
}

static void context_switch(context *from, context *to) { overdub_fiber_switch(&from->sp, to->sp); }
#else
typedef struct { ucontext_t uc; } context;

static void fiber_start(void);

static void context_make(context *c, char *stack, size_t size) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, fiber_start, 0);
}

static void context_switch(context *from, context *to) { swapcontext(&from->uc, &to->uc); }
#endif

/* --- the state of a run -------------------------------------------------------------------------------- */

typedef struct block block;

typedef struct {
    context ctx;
    int64_t state[12];      /* threadIdx.xyz, blockIdx.xyz, blockDim.xyz, gridDim.xyz */
    block *block;
    int status;
    int lane, warp;
    unsigned phase;         /* warp operations done: picks the exchange buffer */
    char *stack;            /* GUARD_SIZE bytes of guard, then stack_size bytes of stack */
    int64_t stack_size;
} fiber;

typedef struct {
    int live, arrived;
    uint32_t live_mask;
    int64_t exchange[2][32];
} warp;

struct block {
    int live, arrived;
    int64_t count, result_count, result_n;
    int nwarps;
    warp *warps;
    fiber *fibers;
    int nfibers;
    int64_t sites[MAX_SITES], site_size[MAX_SITES], site_launch[MAX_SITES];
    void *site_memory[MAX_SITES];
    int nsites;
    char *dynamic;
    int64_t dynamic_size;
};

typedef struct {
    int mode;
    int raise_ends_thread;                  /* an exception ends its thread alone (a launch without debug) */
    compiled_fn fn;
    void *args;
    int64_t grid[3], threads[3], nblocks, nthreads, shmem;
    int64_t stack;                          /* each fiber's stack, in bytes (the kernel's local arrays and more) */
    int64_t next;                           /* next block to take (atomic) */
    int64_t launch;                         /* this grid's number, counted by od_run */
    int status;                             /* OK, KERNEL_ERROR, RUNTIME_ERROR: the first error wins */
    int32_t code;
    void *excinfo;
    char message[512];
    volatile int abort;
    pthread_mutex_t lock;                   /* the error and the grid rendezvous */
    pthread_cond_t rendezvous;
    int expected, arrived;
    long generation;
    int nworkers;
    int pending;                            /* pool threads joined or still to join, not yet done (atomic) */
} job;

typedef struct {
    int64_t own_state[12];
    int64_t *state;                         /* what cuda.threadIdx & co. read in separately compiled callees */
    fiber *current;
    context scheduler;
    job *job;
    fiber *fibers;                          /* kept between launches, with their stacks */
    int fiber_capacity;
    block *blocks;
    int block_capacity;
    int64_t total;                          /* fibers of the running blocks */
    int live, grid_arrived;
    char *frames;                           /* block regions: each thread's frame, kept between launches */
    int64_t frames_size;
} worker;

static __thread worker *tls __attribute__((tls_model("initial-exec"))); /* one word: no call to __tls_get_addr per read */

static void fail(job *j, int status, int32_t code, void *excinfo, const char *message) {
    pthread_mutex_lock(&j->lock);
    if (j->status == OK) {
        j->status = status;
        j->code = code;
        j->excinfo = excinfo;
        if (message)
            snprintf(j->message, sizeof j->message, "%s", message);
    }
    j->abort = 1;
    pthread_cond_broadcast(&j->rendezvous);
    pthread_mutex_unlock(&j->lock);
}

static worker *this_worker(void) {
    if (!tls) {
        tls = calloc(1, sizeof(worker));
        if (!tls)
            abort();
        tls->state = tls->own_state;
    }
    return tls;
}

/* --- fibers -------------------------------------------------------------------------------------------- */

static void yield_to_scheduler(fiber *f) { context_switch(&f->ctx, &tls->scheduler); }

/* Leave fiber `f` (waiting or done) for the next ready fiber after it, in thread order, or the scheduler when
 * none is ready. Whoever switches back to `f` has set the worker's current fiber and state to it. */
static void switch_away(fiber *f) {
    worker *w = tls;
    int64_t total = w->total, at = f - w->fibers;
    for (int64_t k = 1; k < total; k++) {
        fiber *next = &w->fibers[(at + k) % total];
        if (next->status == READY) {
            w->current = next;
            w->state = next->state;
            context_switch(&f->ctx, &next->ctx);
            return;
        }
    }
    yield_to_scheduler(f);
}

/* Once aborted, a fiber never returns to kernel code: it parks in the scheduler for good. */
static void park_if_aborted(fiber *f) {
    if (tls->job->abort)
        for (;;)
            yield_to_scheduler(f);
}

static void wait(fiber *f, int status) {
    f->status = status;
    if (tls->job->abort)
        yield_to_scheduler(f);
    else
        switch_away(f);
    park_if_aborted(f);
}

static void release_block(block *b) {
    b->result_count = b->count;
    b->result_n = b->arrived;
    b->count = b->arrived = 0;
    for (int i = 0; i < b->nfibers; i++)
        if (b->fibers[i].status == WAIT_BLOCK)
            b->fibers[i].status = READY;
}

static void release_warp(block *b, int w) {
    b->warps[w].arrived = 0;
    for (int i = w * 32; i < b->nfibers && i < (w + 1) * 32; i++)
        if (b->fibers[i].status == WAIT_WARP)
            b->fibers[i].status = READY;
}

static int grid_rendezvous(void) {
    job *j = tls->job;
    pthread_mutex_lock(&j->lock);
    long generation = j->generation;
    if (++j->arrived == j->expected) {
        j->arrived = 0;
        j->generation++;
        pthread_cond_broadcast(&j->rendezvous);
    } else {
        while (j->generation == generation && !j->abort)
            pthread_cond_wait(&j->rendezvous, &j->lock);
    }
    pthread_mutex_unlock(&j->lock);
    return !j->abort;
}

static void leave_grid(void) {
    job *j = tls->job;
    pthread_mutex_lock(&j->lock);
    if (--j->expected == j->arrived && j->arrived > 0) {
        j->arrived = 0;
        j->generation++;
        pthread_cond_broadcast(&j->rendezvous);
    }
    pthread_mutex_unlock(&j->lock);
}

static void release_grid(worker *w) {
    w->grid_arrived = 0;
    for (int i = 0; i < w->fiber_capacity; i++)
        if (w->fibers[i].status == WAIT_GRID)
            w->fibers[i].status = READY;
}

static void fiber_exit(fiber *f) {
    worker *w = tls;
    block *b = f->block;
    warp *wp = &b->warps[f->warp];
    f->status = DONE;
    b->live--;
    wp->live--;
    wp->live_mask &= ~(1u << f->lane);
    w->live--;
    if (b->arrived > 0 && b->arrived == b->live)
        release_block(b);
    if (wp->arrived > 0 && wp->arrived == wp->live)
        release_warp(b, f->warp);
    if (w->job->mode == 2 && w->grid_arrived > 0 && w->grid_arrived == w->live && grid_rendezvous())
        release_grid(w);
    if (!w->job->abort)
        switch_away(f);
    for (;;)
        yield_to_scheduler(f);
}

static void fiber_start(void) {
    worker *w = tls;
    fiber *f = w->current;
    char retval[64];
    void *excinfo = NULL;
    int32_t code = w->job->fn(retval, &excinfo, w->job->args, 0, 0, 0);
    if (code != 0 && code != -2 && !w->job->raise_ends_thread)
        fail(w->job, KERNEL_ERROR, code, excinfo, NULL);
    fiber_exit(f);
}

/* Grow *items (*capacity elements of `size` bytes) to hold `wanted`, the new ones zeroed; 0 when out of memory. */
static int grow(void **items, int *capacity, int64_t wanted, size_t size) {
    if (wanted <= *capacity)
        return 1;
    char *grown = realloc(*items, wanted * size);
    if (!grown)
        return 0;
    memset(grown + *capacity * size, 0, (wanted - *capacity) * size);
    *items = grown;
    *capacity = (int)wanted;
    return 1;
}

static int reserve(worker *w, int64_t nfibers, int64_t nblocks, int64_t nwarps) {
    if (!grow((void **)&w->fibers, &w->fiber_capacity, nfibers, sizeof(fiber))
            || !grow((void **)&w->blocks, &w->block_capacity, nblocks, sizeof(block)))
        return 0;
    for (int64_t i = 0; i < nblocks; i++) {
        block *b = &w->blocks[i];
        if (b->nwarps < nwarps) {
            free(b->warps);
            b->warps = calloc(nwarps, sizeof(warp));
            if (!b->warps)
                return b->nwarps = 0, 0;
            b->nwarps = (int)nwarps;
        }
    }
    return 1;
}

/* A stack of at least `size` bytes for fiber `f` (kept between launches, replaced by a larger one when a kernel
 * needs more), above GUARD_SIZE bytes that fault on any access. The launch sizes the stack for the kernel's
 * local arrays plus a margin for its frames, so a local array never reaches below the stack; the guard is wider
 * than any frame besides those arrays, so an overflow faults instead of writing into another mapping. */
static char *fiber_stack(fiber *f, int64_t size) {
    if (f->stack && f->stack_size < size) {
        munmap(f->stack, (size_t)(f->stack_size + GUARD_SIZE));
        f->stack = NULL;
    }
    if (!f->stack) {
        size_t total = (size_t)(size + GUARD_SIZE);
        void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED)
            return NULL;
        if (mprotect(mem, GUARD_SIZE, PROT_NONE) != 0) {
            munmap(mem, total);
            return NULL;
        }
        f->stack = mem;
        f->stack_size = size;
    }
    return f->stack + GUARD_SIZE;
}

/* Slots 3-11 of block `linear`'s state: its indices and the block's and the grid's extents. */
static void block_slots(job *j, int64_t linear, int64_t *state) {
    state[3] = linear % j->grid[0]; state[4] = linear / j->grid[0] % j->grid[1]; state[5] = linear / j->grid[0] / j->grid[1];
    state[6] = j->threads[0]; state[7] = j->threads[1]; state[8] = j->threads[2];
    state[9] = j->grid[0]; state[10] = j->grid[1]; state[11] = j->grid[2];
}

/* The twelve state slots of block `linear`'s fibers: the thread indices counted (not divided out: a division a
 * thread). */
static void write_states(job *j, int64_t linear, fiber *fibers) {
    int64_t tx = 0, ty = 0, tz = 0, slots[12];
    block_slots(j, linear, slots);
    for (int64_t t = 0; t < j->nthreads; t++) {
        int64_t *state = fibers[t].state;
        state[0] = tx; state[1] = ty; state[2] = tz;
        memcpy(state + 3, slots + 3, 9 * sizeof *state);
        if (++tx == j->threads[0]) {
            tx = 0;
            if (++ty == j->threads[1]) {
                ty = 0;
                tz++;
            }
        }
    }
}

/* The block's dynamic shared memory, at least the launch's `shmem` bytes; 0 when out of memory. */
static int reserve_dynamic(block *b, int64_t shmem) {
    if (shmem > b->dynamic_size) {
        free(b->dynamic);
        b->dynamic = calloc(1, shmem);
        b->dynamic_size = b->dynamic ? shmem : 0;
    }
    return shmem <= b->dynamic_size;
}

static int setup_block(worker *w, block *b, fiber *fibers, int64_t linear) {
    job *j = w->job;
    int64_t n = j->nthreads;
    b->fibers = fibers;
    b->nfibers = (int)n;
    b->live = (int)n;
    b->arrived = 0;
    b->count = 0;
    if (!reserve_dynamic(b, j->shmem))
        return 0;
    for (int k = 0; k < (n + 31) / 32; k++) {
        warp *wp = &b->warps[k];
        int lanes = (int)(n - 32 * k < 32 ? n - 32 * k : 32);
        wp->live = lanes;
        wp->arrived = 0;
        wp->live_mask = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    }
    write_states(j, linear, fibers);
    for (int64_t t = 0; t < n; t++) {
        fiber *f = &fibers[t];
        char *stack = fiber_stack(f, j->stack);
        if (!stack)
            return 0;
        f->block = b;
        f->status = READY;
        f->lane = (int)(t & 31);
        f->warp = (int)(t >> 5);
        f->phase = 0;
        context_make(&f->ctx, stack, (size_t)f->stack_size);
    }
    return 1;
}

/* Run the fibers of `nblocks` blocks (linear indices first, first + stride, ...) until all are done. */
static void run_fibers(worker *w, int64_t first, int64_t stride, int64_t nblocks) {
    job *j = w->job;
    int64_t n = j->nthreads;
    if (!reserve(w, n * nblocks, nblocks, (n + 31) / 32)) {
        fail(j, RUNTIME_ERROR, 0, NULL, "out of memory for the fibers of a block");
        return;
    }
    for (int64_t k = 0; k < nblocks; k++)
        if (!setup_block(w, &w->blocks[k], &w->fibers[k * n], first + k * stride)) {
            fail(j, RUNTIME_ERROR, 0, NULL, "out of memory for the fiber stacks or shared memory of a block");
            return;
        }
    int64_t total = n * nblocks;
    for (int64_t i = total; i < w->fiber_capacity; i++)
        w->fibers[i].status = DONE;
    w->live = (int)total;
    w->total = total;
    w->grid_arrived = 0;
    while (w->live > 0 && !j->abort) {
        int ran = 0;
        for (int64_t i = 0; i < total && !j->abort; i++) {
            fiber *f = &w->fibers[i];
            if (f->status != READY)
                continue;
            ran = 1;
            w->current = f;
            w->state = f->state;
            context_switch(&w->scheduler, &f->ctx);
        }
        if (!ran && w->live > 0 && !j->abort) {
            fiber *f = NULL;
            for (int64_t i = 0; i < total && !f; i++)
                if (w->fibers[i].status != DONE)
                    f = &w->fibers[i];
            char message[400];
            snprintf(message, sizeof message,
                     "deadlock in block (%lld, %lld, %lld): its threads wait at barriers that cannot complete "
                     "(some at cuda.syncthreads, others at a warp operation or a grid sync); every thread of a "
                     "block must reach the same barriers",
                     (long long)f->state[3], (long long)f->state[4], (long long)f->state[5]);
            fail(j, RUNTIME_ERROR, 0, NULL, message);
        }
    }
    w->current = NULL;
    w->state = w->own_state;
}

/* What a compiled pass reads and writes (regions.py's _PASS): the threads [start, n) to run, the last barrier's
 * counts for those resuming after it, whether the threads start afresh (the block's first pass: no frame is read);
 * back, the next barrier's count of true predicates and of arrivals, the live threads, the thread whose error the
 * pass returns; where the running thread's state goes where callees compiled on their own read it, the frames, and
 * the block's state slots (the pass counts its threads' indices in slots 0-2). */
typedef struct {
    int64_t start, n;
    int32_t result_count, result_n;
    int64_t count, arrived, live, failed;
    int64_t **state;
    char *frames;
    int64_t fresh;
    int64_t slots[12];
} regions_pass;

/* Block regions: run block `linear`, its threads run in turn from where each stands to its next barrier, a pass
 * per region. A pass is one call of the compiled pass (the address of a regions_pass its `first` argument): it
 * gets the block's shared arrays (od_shared), then runs the cut body for each thread not done, with the thread's
 * frame (`size` bytes, regions.py lays it out: where the thread resumes -- k after its k-th barrier, -1 once done
 * -- then its values live across barriers). Nothing here touches a frame. A thread that returns is done (an
 * exited thread counts as arrived, as in run_fibers); after a pass every live thread waits at a barrier, which
 * then completes. */
static void run_regions(worker *w, int64_t linear) {
    job *j = w->job;
    int64_t n = j->nthreads, size = j->stack;
    if (!reserve(w, 1, 1, 0)) {
        fail(j, RUNTIME_ERROR, 0, NULL, "out of memory for a block");
        return;
    }
    if (n * size > w->frames_size) {
        free(w->frames);
        w->frames = aligned_alloc(FRAME_ALIGN, (size_t)((n * size + FRAME_ALIGN - 1) & ~(int64_t)(FRAME_ALIGN - 1)));
        w->frames_size = w->frames ? n * size : 0;
        if (!w->frames) {
            fail(j, RUNTIME_ERROR, 0, NULL, "out of memory for the frames of a block's threads");
            return;
        }
    }
    block *b = &w->blocks[0];
    if (!reserve_dynamic(b, j->shmem)) {
        fail(j, RUNTIME_ERROR, 0, NULL, "out of memory for the dynamic shared memory of a block");
        return;
    }
    fiber *holder = &w->fibers[0];  /* what od_shared reads the block from */
    holder->block = b;
    w->current = holder;
    regions_pass pass = {0, n, 0, 0, 0, 0, n, 0, &w->state, w->frames, 1, {0}};
    block_slots(j, linear, pass.slots);
    char retval[64];
    for (; pass.live > 0 && !j->abort; pass.fresh = 0) {
        pass.result_count = (int32_t)pass.count;
        pass.result_n = (int32_t)pass.arrived;
        pass.count = pass.arrived = 0;
        for (pass.start = 0; !j->abort;) {
            void *excinfo = NULL;
            int32_t code = j->fn(retval, &excinfo, j->args, (int64_t)(intptr_t)&pass, 0, 0);
            if (code == 0 || code == NO_SHARED)
                break;
            if (!j->raise_ends_thread) {  /* thread pass.failed raised (and is done) */
                fail(j, KERNEL_ERROR, code, excinfo, NULL);
                break;
            }
            pass.start = pass.failed + 1;
        }
    }
    w->current = NULL;
    w->state = w->own_state;
}

/* --- what compiled kernels call ------------------------------------------------------------------------ */

static int64_t *od_state(void) { return this_worker()->state; }

static fiber *current_fiber(const char *what) {
    worker *w = this_worker();
    if (!w->current) {
        fprintf(stderr, "overdub internal error: %s outside a fiber\n", what);
        abort();
    }
    return w->current;
}

/* A construct that waits, called where threads are no fibers (block regions: regions.py sends such kernels to
 * fibers at compile time, so this is never reached). */
static fiber *waiting_fiber(const char *what) {
    fiber *f = current_fiber(what);
    if (tls->job->mode == 4) {
        fprintf(stderr, "overdub internal error: %s in a kernel run as block regions\n", what);
        abort();
    }
    return f;
}

/* The result of a barrier of op 0-3 (__syncthreads and its count/and/or forms) over the block's live threads. */
static int32_t barrier_result(block *b, int32_t op) {
    switch (op) {
    case 1: return (int32_t)b->result_count;
    case 2: return b->result_count == b->result_n;
    case 3: return b->result_count > 0;
    default: return 0;
    }
}

static int32_t od_barrier(int32_t op, int32_t predicate) {
    fiber *f = waiting_fiber("a block barrier");
    block *b = f->block;
    b->count += predicate != 0;
    if (++b->arrived == b->live) {
        release_block(b);
    } else {
        wait(f, WAIT_BLOCK);
    }
    return barrier_result(b, op);
}

static void warp_barrier(fiber *f) {
    block *b = f->block;
    warp *wp = &b->warps[f->warp];
    if (++wp->arrived == wp->live)
        release_warp(b, f->warp);
    else
        wait(f, WAIT_WARP);
}

/* A warp operation: every live lane of the warp deposits `value`, then each reads what `op` says.
 * op: 0 shfl (from lane arg), 1 shfl_up (lane - arg), 2 shfl_down (lane + arg), 3 shfl_xor (lane ^ arg),
 * 4 all, 5 any, 6 ballot, 7 syncwarp, 8 eq (all lanes of mask agree). Lanes outside the warp or exited give
 * the caller its own value, as a shuffle out of range does on the GPU. */
static int64_t od_warp(int32_t op, int64_t value, int64_t arg, int64_t mask) {
    fiber *f = waiting_fiber("a warp operation");
    warp *wp = &f->block->warps[f->warp];
    int64_t *exchange = wp->exchange[f->phase++ & 1];
    exchange[f->lane] = value;
    warp_barrier(f);
    uint32_t lanes = wp->live_mask & (uint32_t)mask;
    int64_t source;
    switch (op) {
    case 0: source = arg & 31; break;
    case 1: source = f->lane - arg; break;
    case 2: source = f->lane + arg; break;
    case 3: source = f->lane ^ arg; break;
    case 7: return 0;
    default: {
        uint32_t ballot = 0;
        int all_equal = 1;
        for (int i = 0; i < 32; i++)
            if (lanes & (1u << i)) {
                ballot |= (uint32_t)(exchange[i] != 0) << i;
                all_equal &= exchange[i] == value;
            }
        if (op == 4) return (ballot & lanes) == lanes;
        if (op == 5) return ballot != 0;
        if (op == 8) return all_equal;
        return ballot;
    }
    }
    if (source < 0 || source > 31 || !(wp->live_mask & (1u << source)))
        return value;
    return exchange[source];
}

static int64_t od_activemask(void) {
    fiber *f = waiting_fiber("cuda.activemask");
    return f->block->warps[f->warp].live_mask;
}

static void od_grid_sync(void) {
    fiber *f = waiting_fiber("a grid sync");
    worker *w = tls;
    if (w->job->mode != 2) {
        fprintf(stderr, "overdub internal error: grid sync in a launch without grid fibers\n");
        abort();
    }
    if (++w->grid_arrived == w->live) {
        if (grid_rendezvous())
            release_grid(w);
        park_if_aborted(f);
    } else {
        wait(f, WAIT_GRID);
    }
}

/* Forget the sites of grids launched before this one (their memory is no one's now). */
static void forget_earlier_sites(block *b, int64_t launch) {
    int kept = 0;
    for (int i = 0; i < b->nsites; i++) {
        if (b->site_launch[i] == launch) {
            b->sites[kept] = b->sites[i];
            b->site_size[kept] = b->site_size[i];
            b->site_launch[kept] = b->site_launch[i];
            b->site_memory[kept++] = b->site_memory[i];
        } else {
            free(b->site_memory[i]);
        }
    }
    b->nsites = kept;
}

/* The block's memory for the shared array of call site `site`, `nbytes` long (static shared memory). A site is
 * matched by its number and size: numbers are drawn per process (cpu_sync.py), and a kernel loaded from the
 * disk cache brings another process's. */
static void *od_shared(int64_t site, int64_t nbytes) {
    fiber *f = current_fiber("cuda.shared.array");
    block *b = f->block;
    int64_t launch = tls->job->launch;
    for (int i = 0; i < b->nsites; i++)
        if (b->sites[i] == site && b->site_size[i] == nbytes) {
            b->site_launch[i] = launch;
            return b->site_memory[i];
        }
    if (b->nsites == MAX_SITES)
        forget_earlier_sites(b, launch);
    void *memory = b->nsites < MAX_SITES ? calloc(1, nbytes > 0 ? nbytes : 1) : NULL;
    if (!memory) {
        fail(tls->job, RUNTIME_ERROR, 0, NULL, b->nsites < MAX_SITES ? "out of memory for a shared array" :
             "a kernel uses more than 64 shared arrays (call sites of cuda.shared.array), the CPU target's limit");
        if (tls->job->mode == 4)  /* asked by a pass, before any thread runs: it returns NO_SHARED */
            return NULL;
        park_if_aborted(f);
    }
    b->sites[b->nsites] = site;
    b->site_size[b->nsites] = nbytes;
    b->site_launch[b->nsites] = launch;
    b->site_memory[b->nsites++] = memory;
    return memory;
}

static void *od_dynamic_shared(void) { return current_fiber("dynamic shared memory")->block->dynamic; }

static int64_t od_dynamic_shared_size(void) { return tls->job->shmem; }

static __thread char last_message[512];     /* the RUNTIME_ERROR of this thread's last grid */

/* --- the pool ------------------------------------------------------------------------------------------ */

/* The blocks [first, end) in rows: a run of blocks sharing a y and z block index at a time (g = their y and z
 * index, j + gy * k) -- in mode 3 one block at a time -- and in it each thread y and z index (r = ty + by *
 * tz): the row loop's x range is the run's threads, its row number g * by * bz + r. Stops at the first
 * error. */
static void run_rows(job *j, int64_t first, int64_t end) {
    char retval[64];
    int64_t gx = j->grid[0], bx = j->threads[0], rows = j->threads[1] * j->threads[2];
    for (int64_t b = first; b < end && !j->abort;) {
        int64_t i = b % gx, g = b / gx;
        int64_t run = gx - i < end - b ? gx - i : end - b;
        int64_t step = j->mode == 3 ? 1 : run;
        for (int64_t k = i; k < i + run; k += step) {
            for (int64_t r = 0; r < rows; r++) {
                void *excinfo = NULL;
                int32_t code = j->fn(retval, &excinfo, j->args, k * bx, (k + step) * bx, g * rows + r);
                if (code != 0 && code != -2) {
                    fail(j, KERNEL_ERROR, code, excinfo, NULL);
                    return;
                }
            }
        }
        b += run;
    }
}

/* The next chunk of blocks, [*first, *end), for a worker of the grid loop; 0 when none is left. Guided, as
 * OpenMP's schedule: a chunk is the blocks left over twice the workers, so early chunks are long (few calls)
 * and the last ones short (no worker finishes long after the others). */
static int take_chunk(job *j, int64_t *first, int64_t *end) {
    int64_t next = __atomic_load_n(&j->next, __ATOMIC_RELAXED), size;
    do {
        if (next >= j->nblocks || j->abort)
            return 0;
        size = (j->nblocks - next) / (2 * j->nworkers);
        if (size < 1)
            size = 1;
        if (size > j->nblocks - next)
            size = j->nblocks - next;
    } while (!__atomic_compare_exchange_n(&j->next, &next, next + size, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    *first = next;
    *end = next + size;
    return 1;
}

static void run_job(job *j) {
    worker *w = this_worker();
    w->job = j;
    w->state = w->own_state;
    if (j->mode == 0 || j->mode == 3) {
        int64_t first, end;
        while (take_chunk(j, &first, &end))
            run_rows(j, first, end);
    } else if (j->mode == 1 || j->mode == 4) {
        int64_t b;
        while (!j->abort && (b = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->nblocks) {
            if (j->mode == 1)
                run_fibers(w, b, 1, 1);
            else
                run_regions(w, b);
        }
    } else {
        int64_t me = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (me < j->nworkers) {
            run_fibers(w, me, j->nworkers, (j->nblocks - me + j->nworkers - 1) / j->nworkers);
            leave_grid();
        }
    }
}

/* The grid on offer to the pool: its serial number (high 32 bits) and the tickets left (low 32 bits), one word
 * that pool threads take a ticket from with a compare-and-swap -- a grid that wants 3 of 15 spinning threads
 * makes no 15-way convoy on a lock. */
#define TICKETS 0xffffffffull

static struct {
    pthread_mutex_t lock;           /* one grid at a time: launches run in order, as on one stream */
    pthread_mutex_t state;          /* the sleeping side: wake and done */
    pthread_cond_t wake, done;
    job *job;                       /* the grid on offer (kept until the next one: a ticket holder reads it) */
    uint64_t offer;                 /* (serial << 32) | tickets left (atomic) */
    int started;
    int64_t launches;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0};

/* Waiting spins this long before it sleeps: launches in a loop come back within microseconds, and a wake through
 * the kernel costs tens of them on a loaded machine (numba's parallel runtime spins too). */
#define SPIN_NS 100000

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Each turn of a spin: a pause, and every 256 turns a look at the clock; true once SPIN_NS have passed since the
 * first look (the caller then takes the lock and sleeps if it must). */
static int spun_out(int turn, int64_t *deadline) {
    cpu_relax();
    if (turn & 255)
        return 0;
    int64_t now = monotonic_ns();
    if (!*deadline)
        *deadline = now + SPIN_NS;
    return now > *deadline;
}

static uint32_t serial_of(uint64_t offer) { return (uint32_t)(offer >> 32); }

static void spin_while_offered(uint32_t serial) {
    int64_t deadline = 0;
    for (int i = 1; serial_of(__atomic_load_n(&pool.offer, __ATOMIC_ACQUIRE)) == serial && !spun_out(i, &deadline); i++)
        ;
}

static void spin_while_positive(int *word) {
    int64_t deadline = 0;
    for (int i = 1; __atomic_load_n(word, __ATOMIC_ACQUIRE) > 0 && !spun_out(i, &deadline); i++)
        ;
}

/* A pool thread: waits for a grid (spinning, then asleep), takes one of its tickets if any is left (a grid may use
 * fewer threads than the pool has), runs its share, says it is done -- once per grid: the serial it saw. A
 * ticket taken keeps the grid from ending (its pending count), so the grid the pool offers is read safely after;
 * the grid revokes the tickets not taken once its own share is run: a thread that comes late never touches it. */
static void *pool_thread(void *unused) {
    (void)unused;
    uint32_t seen = 0;
    for (;;) {
        spin_while_offered(seen);
        uint64_t offer = __atomic_load_n(&pool.offer, __ATOMIC_ACQUIRE);
        if (serial_of(offer) == seen) {
            pthread_mutex_lock(&pool.state);
            while (serial_of(offer = __atomic_load_n(&pool.offer, __ATOMIC_ACQUIRE)) == seen)
                pthread_cond_wait(&pool.wake, &pool.state);
            pthread_mutex_unlock(&pool.state);
        }
        seen = serial_of(offer);
        int joined = 0;
        while (!joined && serial_of(offer) == seen && (offer & TICKETS) > 0)
            joined = __atomic_compare_exchange_n(&pool.offer, &offer, offer - 1, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE);
        if (!joined)
            continue;
        job *j = pool.job;
        run_job(j);
        if (__atomic_sub_fetch(&j->pending, 1, __ATOMIC_ACQ_REL) == 0) { /* j is not read again */
            pthread_mutex_lock(&pool.state);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.state);
        }
    }
    return NULL;
}

/* Start pool threads until there are `helpers`; returns how many there are. */
static int grow_pool(int helpers) {
    while (pool.started < helpers) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 8 << 20);
        int failed = pthread_create(&thread, &attr, pool_thread, NULL);
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        pthread_detach(thread);
        pool.started++;
    }
    return pool.started < helpers ? pool.started : helpers;
}

/* Run one grid. Returns OK, KERNEL_ERROR (*code and *excinfo say which exception, for the caller to raise)
 * or RUNTIME_ERROR (od_message() says what). */
static int32_t od_run(int64_t mode, int64_t nworkers, compiled_fn fn, void *args, int64_t gx, int64_t gy,
                      int64_t gz, int64_t tx, int64_t ty, int64_t tz, int64_t shmem, int64_t stack,
                      int32_t *code, void **excinfo) {
    job j;
    memset(&j, 0, sizeof j);
    j.mode = (int)(mode & RAISE_ENDS_THREAD ? mode - RAISE_ENDS_THREAD : mode);
    j.raise_ends_thread = (mode & RAISE_ENDS_THREAD) != 0;
    j.fn = fn;
    j.args = args;
    j.grid[0] = gx; j.grid[1] = gy; j.grid[2] = gz;
    j.threads[0] = tx; j.threads[1] = ty; j.threads[2] = tz;
    j.nblocks = gx * gy * gz;
    j.nthreads = tx * ty * tz;
    j.shmem = shmem;
    /* fibers: a stack in whole pages; block regions: a frame (regions.py: a multiple of its alignment) */
    j.stack = j.mode == 4 ? stack : (stack + 4095) & ~(int64_t)4095;
    if (j.mode == 2 && j.nblocks * j.nthreads > MAX_RESIDENT_THREADS) {
        snprintf(last_message, sizeof last_message,
                 "a grid sync needs every block of the grid resident, and %lld blocks of %lld threads exceed the "
                 "CPU target's %d resident threads (a GPU refuses such a cooperative launch too)",
                 (long long)j.nblocks, (long long)j.nthreads, MAX_RESIDENT_THREADS);
        return RUNTIME_ERROR;
    }
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.rendezvous, NULL);
    if (nworkers > j.nblocks)
        nworkers = j.nblocks;
    if (nworkers < 1)
        nworkers = 1;
    pthread_mutex_lock(&pool.lock);
    j.launch = ++pool.launches;
    int helpers = nworkers > 1 ? grow_pool((int)nworkers - 1) : 0;
    j.nworkers = helpers + 1;
    j.expected = j.nworkers;
    if (helpers) {
        pool.job = &j;
        j.pending = helpers;
        uint64_t serial = serial_of(pool.offer) + 1u;
        if (serial == 0)  /* 0 is what a pool thread has seen before any grid */
            serial = 1;
        __atomic_store_n(&pool.offer, (serial << 32) | (uint64_t)helpers, __ATOMIC_RELEASE); /* spinners see it */
        pthread_mutex_lock(&pool.state);  /* and sleepers are woken */
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.state);
    }
    run_job(&j);
    if (helpers) {
        /* every block is taken (a grid syncing its grid returns once all its threads arrived): the tickets not
         * taken yet are revoked and not waited for */
        uint64_t offer = __atomic_fetch_and(&pool.offer, ~TICKETS, __ATOMIC_ACQ_REL);
        __atomic_sub_fetch(&j.pending, (int)(offer & TICKETS), __ATOMIC_ACQ_REL);
        spin_while_positive(&j.pending);
        pthread_mutex_lock(&pool.state);
        while (__atomic_load_n(&j.pending, __ATOMIC_ACQUIRE) > 0)
            pthread_cond_wait(&pool.done, &pool.state);
        pthread_mutex_unlock(&pool.state);
    }
    pthread_mutex_unlock(&pool.lock);
    *code = j.code;
    *excinfo = j.excinfo;
    memcpy(last_message, j.message, sizeof last_message);
    pthread_mutex_destroy(&j.lock);
    pthread_cond_destroy(&j.rendezvous);
    return j.status;
}

/* --- the module: the addresses compiled code calls, and the last error message ------------------------- */

static PyObject *symbols(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
                         "run", (unsigned long long)(uintptr_t)od_run,
                         "state", (unsigned long long)(uintptr_t)od_state,
                         "barrier", (unsigned long long)(uintptr_t)od_barrier,
                         "warp", (unsigned long long)(uintptr_t)od_warp,
                         "activemask", (unsigned long long)(uintptr_t)od_activemask,
                         "grid_sync", (unsigned long long)(uintptr_t)od_grid_sync,
                         "shared", (unsigned long long)(uintptr_t)od_shared,
                         "dynamic_shared", (unsigned long long)(uintptr_t)od_dynamic_shared,
                         "dynamic_shared_size", (unsigned long long)(uintptr_t)od_dynamic_shared_size);
}

static PyObject *last_error(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyUnicode_FromString(last_message);
}

static PyMethodDef methods[] = {
    {"symbols", symbols, METH_NOARGS, "The addresses of the functions compiled kernels call, by name."},
    {"last_error", last_error, METH_NOARGS, "The message of this thread's last failed grid."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cpugrid", NULL, -1, methods};

/* A forked child has none of the pool's threads: it starts its own pool, with fresh locks. */
static void forked_child(void) {
    pthread_mutex_init(&pool.lock, NULL);
    pthread_mutex_init(&pool.state, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.job = NULL;
    pool.offer = 0;
    pool.started = 0;
}

PyMODINIT_FUNC PyInit__cpugrid(void) {
    pthread_atfork(NULL, NULL, forked_child);
    return PyModule_Create(&module);
}
