// HIP on the CPU: just enough of HIP's device language for gimmik's kernels,
// with every thread of a block run as a cooperating fiber so that barriers
// and wavefront-wide MFMA instructions are honoured.
//
// Included ahead of the unchanged kernel source; the executor appends a
// trampoline that calls the kernel and gimmik_emu_entry, its C entry point.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#  define GIMMIK_EMU_ASAN 1
extern "C" void __sanitizer_start_switch_fiber(void **, const void *, size_t);
extern "C" void __sanitizer_finish_switch_fiber(void *, const void **, size_t *);
#endif

struct gimmik_emu_dim3 { unsigned x, y, z; };

static gimmik_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __constant__
// Shared memory lives in its own section so that it can be poisoned (all
// bits set: NaN) before every block, as uninitialised LDS would be.
#define __shared__ static __attribute__((section("gimmik_lds")))
#define __syncthreads() gimmik_emu::barrier()
#define __builtin_nontemporal_load(p) (*(p))
#define __builtin_nontemporal_store(v, p) (*(p) = (v))
// A fiber is one lane: broadcasting lane 0's value is the value itself for
// the wave-uniform operands kernels use it on (the wavefront index).
#define __builtin_amdgcn_readfirstlane(x) (x)
// A lane's loads are complete when they return: waiting is a no-op.
#define __builtin_amdgcn_s_waitcnt(x) ((void) 0)
#define __builtin_amdgcn_mfma_f64_16x16x4f64(a, b, acc, cbsz, abid, blgp) \
    gimmik_emu::mfma_f64_16x16x4((a), (b), (acc), (cbsz), (abid), (blgp), \
                                 __LINE__)

// One always-present shared variable, so the section exists.
static double gimmik_emu_lds_anchor[1] __attribute__((section("gimmik_lds"),
                                                      used));
extern "C" char __start_gimmik_lds[], __stop_gimmik_lds[];

namespace gimmik_emu {

enum State { RUNNABLE, AT_BARRIER, AT_MFMA, DONE };

typedef double v4d __attribute__((vector_size(32)));

struct Fiber {
    ucontext_t ctx;
    State state;
    gimmik_emu_dim3 tid;
    // MFMA operands and result of this lane
    double a, b;
    v4d acc;
    int line;
};

// A fiber's stack: what the compiler measured the kernel's unit to need
// (-fstack-usage, summed over its functions; the executor defines
// gimmik_emu_stack_bytes when it links the kernel), plus room for the shim
// and the C library, and never less than STACK_MIN.
extern "C" const unsigned long gimmik_emu_stack_bytes;
static const size_t STACK_MIN = 512*1024, STACK_MARGIN = 256*1024;
static const size_t STACK = ((gimmik_emu_stack_bytes + STACK_MARGIN
                              > STACK_MIN ? gimmik_emu_stack_bytes
                              + STACK_MARGIN : STACK_MIN) + 65535)
                            & ~(size_t) 65535;
static Fiber *fibers;
static char *stacks;
static int nfib, cur, capacity;
static ucontext_t sched;
static void (*kernel)(void **);
static void **kargs;
static char errmsg[512];
static int failed;

#ifdef GIMMIK_EMU_ASAN
static void *fake_stack;
#endif

static void enter_scheduler(State s)
{
    fibers[cur].state = s;
#ifdef GIMMIK_EMU_ASAN
    __sanitizer_start_switch_fiber(&fake_stack, nullptr, 0);
#endif
    swapcontext(&fibers[cur].ctx, &sched);
#ifdef GIMMIK_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

static void barrier() { enter_scheduler(AT_BARRIER); }

template<class V>
static V mfma_f64_16x16x4(double a, double b, V acc, int cbsz, int abid,
                          int blgp, int line)
{
    static_assert(sizeof(V) == 4*sizeof(double), "MFMA takes 4 doubles");
    Fiber &f = fibers[cur];
    if (cbsz || abid || blgp) {
        snprintf(errmsg, sizeof errmsg, "MFMA with modifiers (cbsz=%d, "
                 "abid=%d, blgp=%d) is not emulated", cbsz, abid, blgp);
        failed = 1;
    }
    f.a = a;
    f.b = b;
    memcpy(&f.acc, &acc, sizeof acc);
    f.line = line;
    enter_scheduler(AT_MFMA);
    V d;
    memcpy(&d, &fibers[cur].acc, sizeof d);
    return d;
}

// All 64 lanes of wave w are at an MFMA: D = A(16x4) B(4x16) + C with lane
// L = 16g + t supplying A[t][g] and B[g][t] and holding D[4v + g][t] in v.
static void exec_mfma(int w)
{
    Fiber *lane = fibers + 64*w;
    v4d d[64];
    for (int L = 0; L < 64; L++) {
        const int g = L / 16, t = L % 16;
        for (int v = 0; v < 4; v++) {
            double s = lane[L].acc[v];
            for (int k = 0; k < 4; k++)
                s += lane[16*k + 4*v + g].a * lane[16*k + t].b;
            d[L][v] = s;
        }
    }
    for (int L = 0; L < 64; L++) {
        lane[L].acc = d[L];
        lane[L].state = RUNNABLE;
    }
}

static void fiber_main()
{
#ifdef GIMMIK_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    kernel(kargs);
    enter_scheduler(DONE);
}

// Wake up what can proceed; false if nothing can (an error is then set).
static bool release()
{
    int nbar = 0, nmfma = 0;
    for (int i = 0; i < nfib; i++) {
        nbar += fibers[i].state == AT_BARRIER;
        nmfma += fibers[i].state == AT_MFMA;
    }
    if (nmfma) {
        bool woke = false;
        const int nwave = (nfib + 63) / 64;
        for (int w = 0; w < nwave; w++) {
            int at = 0, line = -1, same = 1;
            for (int L = 0; L < 64 && 64*w + L < nfib; L++) {
                const Fiber &f = fibers[64*w + L];
                if (f.state == AT_MFMA) {
                    same &= line < 0 || f.line == line;
                    line = f.line;
                    at++;
                }
            }
            if (!at)
                continue;
            if (nfib < 64*(w + 1) || at != 64 || !same) {
                snprintf(errmsg, sizeof errmsg, "divergent MFMA: %d of the "
                         "64 lanes of wavefront %d reached it%s", at, w,
                         same ? "" : " at different call sites");
                return false;
            }
            exec_mfma(w);
            woke = true;
        }
        if (woke)
            return true;
    }
    if (nbar == nfib) {
        for (int i = 0; i < nfib; i++)
            fibers[i].state = RUNNABLE;
        return true;
    }
    snprintf(errmsg, sizeof errmsg, "divergent __syncthreads: %d of %d "
             "threads reached the barrier, the others returned", nbar, nfib);
    return false;
}

static int run_block(void (*body)())
{
    for (int i = 0; i < nfib; i++) {
        Fiber &f = fibers[i];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks + i*STACK;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &sched;
        makecontext(&f.ctx, body, 0);
        f.state = RUNNABLE;
    }
    memset(__start_gimmik_lds, 0xff, __stop_gimmik_lds - __start_gimmik_lds);

    for (;;) {
        int done = 0;
        for (cur = 0; cur < nfib; cur++) {
            if (fibers[cur].state == RUNNABLE) {
                threadIdx = fibers[cur].tid;
#ifdef GIMMIK_EMU_ASAN
                void *fs;
                __sanitizer_start_switch_fiber(&fs, stacks + cur*STACK, STACK);
#endif
                swapcontext(&sched, &fibers[cur].ctx);
#ifdef GIMMIK_EMU_ASAN
                __sanitizer_finish_switch_fiber(fs, nullptr, nullptr);
#endif
                if (failed)
                    return 1;
            }
            done += fibers[cur].state == DONE;
        }
        if (done == nfib)
            return 0;
        if (!release())
            return 1;
    }
}

static int launch(void (*k)(void **), void **args, const int grid[3],
                  const int block[3])
{
    nfib = block[0]*block[1]*block[2];
    if (nfib < 1 || nfib > 1024) {
        snprintf(errmsg, sizeof errmsg, "block of %d threads", nfib);
        return 1;
    }
    if (nfib > capacity) {
        if (stacks)
            munmap(stacks, capacity*STACK);
        free(fibers);
        stacks = (char *) mmap(nullptr, nfib*STACK, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                               -1, 0);
        fibers = (Fiber *) calloc(nfib, sizeof(Fiber));
        if (stacks == MAP_FAILED || !fibers) {
            snprintf(errmsg, sizeof errmsg, "cannot allocate %d fiber "
                     "stacks of %zu bytes", nfib, STACK);
            if (stacks != MAP_FAILED)
                munmap(stacks, nfib*STACK);
            free(fibers);
            stacks = nullptr;
            fibers = nullptr;
            capacity = 0;
            return 1;
        }
        capacity = nfib;
    }
    for (int i = 0; i < nfib; i++) {
        fibers[i].tid.x = i % block[0];
        fibers[i].tid.y = (i / block[0]) % block[1];
        fibers[i].tid.z = i / (block[0]*block[1]);
    }
    kernel = k;
    kargs = args;
    failed = 0;
    errmsg[0] = '\0';
    blockDim = {(unsigned) block[0], (unsigned) block[1], (unsigned) block[2]};
    gridDim = {(unsigned) grid[0], (unsigned) grid[1], (unsigned) grid[2]};
    for (int z = 0; z < grid[2]; z++)
        for (int y = 0; y < grid[1]; y++)
            for (int x = 0; x < grid[0]; x++) {
                blockIdx = {(unsigned) x, (unsigned) y, (unsigned) z};
                if (run_block(fiber_main))
                    return 1;
            }
    return 0;
}

}  // namespace gimmik_emu

#define GIMMIK_EMU_ENTRY(call)                                              \
    extern "C" int gimmik_emu_entry(void **args, const int *grid,          \
                                    const int *block, char *msg, int len)  \
    {                                                                       \
        int r = gimmik_emu::launch(call, args, grid, block);               \
        snprintf(msg, len, "%s", gimmik_emu::errmsg);                       \
        return r;                                                           \
    }
