// CUDA on the CPU: just enough of CUDA's device language for gimmik's
// kernels, every thread of a block an OS thread (blocks one after another)
// so that __syncthreads() and the warp-wide mma.sync are honoured.
//
// Included ahead of the unchanged kernel source.  The source's tensor-core
// helpers enter the emulation through the hooks the templates provide
// (kernels/cuda/mma-lib.mako): GIMMIK_EMULATE selects gimmik_emu_mma and
// gimmik_emu_cp16 instead of inline PTX, and GIMMIK_CP_ASYNC (a cp.async
// group operation) runs gimmik_emu_cp_async: a thread's copies land only
// when a wait_group lets their group complete, so a kernel that reads a
// stage before waiting for it reads poisoned shared memory.  The
// executor appends a trampoline that calls the kernel and
// gimmik_emu_entry, its C entry point.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#define GIMMIK_EMULATE 1
#define GIMMIK_CP_ASYNC(op) gimmik_emu_cp_async(op)

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)
#define __align__(x) __attribute__((aligned(x)))
// Shared memory lives in its own section so that it can be poisoned (all
// bits set: NaN) before every block, as uninitialised shared memory would
// be; a block's threads share it as function-local statics.
#define __shared__ static __attribute__((section("gimmik_smem")))

struct __align__(16) double2 { double x, y; };
struct __align__(8) float2 { float x, y; };
struct gimmik_emu_dim3 { unsigned x, y, z; };

static thread_local gimmik_emu_dim3 threadIdx, blockIdx;
static gimmik_emu_dim3 blockDim, gridDim;

// One always-present shared variable, so the section exists.
static double gimmik_emu_smem_anchor[1] __attribute__((section("gimmik_smem"),
                                                       used));
extern "C" char __start_gimmik_smem[], __stop_gimmik_smem[];

template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }

namespace gimmik_emu {

static std::barrier<>* block_barrier;

// The lanes' fragments of a warp's mma, exchanged through memory.
struct Warp { double a[32][8], b[32][4], x[32]; std::barrier<>* bar; };
static Warp warps[32];

static inline int linear_tid()
{
    return threadIdx.x + blockDim.x*(threadIdx.y + blockDim.y*threadIdx.z);
}

}  // namespace gimmik_emu

static inline void __syncthreads() { gimmik_emu::block_barrier->arrive_and_wait(); }

// cp.async of 16 bytes (bytes < 16 zero-fills the rest), queued in the
// thread's open group; the group operations of PTX: commit_group closes the
// open group, wait_group N completes all closed groups but the newest N
// (wait_all: all of them).
namespace gimmik_emu {
struct Copy { double* dst; const double* src; int bytes; };
static thread_local std::vector<std::vector<Copy>> cp_groups(1);
}

static inline void gimmik_emu_cp16(double* dst, const double* src, int bytes)
{
    gimmik_emu::cp_groups.back().push_back({dst, src, bytes});
}

static void gimmik_emu_cp_async(const char* op)
{
    auto& groups = gimmik_emu::cp_groups;
    int keep = 0;
    if (std::strcmp(op, "commit_group") == 0)
    {
        groups.emplace_back();
        return;
    }
    else if (std::strcmp(op, "wait_all") == 0)
        groups.emplace_back();
    else if (std::sscanf(op, "wait_group %d", &keep) != 1 || keep < 0)
    {
        std::fprintf(stderr, "gimmik_emu: unknown cp.async op %s\n", op);
        std::terminate();
    }
    // groups.back() is the open group; closed ones precede it
    const int nclosed = int(groups.size()) - 1;
    const int ndone = nclosed > keep ? nclosed - keep : 0;
    for (int i = 0; i < ndone; ++i)
        for (const auto& c : groups[i])
        {
            std::memset(c.dst, 0, 16);
            std::memcpy(c.dst, c.src, c.bytes);
        }
    groups.erase(groups.begin(), groups.begin() + ndone);
}

// __shfl_xor_sync of a double over the whole warp (every lane calls it).
static inline double __shfl_xor_sync(unsigned, double v, int laneMask)
{
    const int tid = gimmik_emu::linear_tid(), lane = tid % 32;
    gimmik_emu::Warp& w = gimmik_emu::warps[tid / 32];
    w.x[lane] = v;
    w.bar->arrive_and_wait();
    const double r = w.x[lane ^ laneMask];
    w.bar->arrive_and_wait();
    return r;
}

// D += A*B for one f64 mma.sync of shape MT x 8 x KT over the warp, with
// the fragment layouts of the PTX ISA (g = lane/4, t = lane%4):
//   m8n8k4:  a0 = A[g][t], b0 = B[t][g], c_i = C[g][2t + i];
//   m16n8kK: a_i = A[g + 8(i%2)][t + 4(i/2)], b_i = B[t + 4i][g],
//            c_i = C[g + 8(i/2)][2t + i%2].
static void gimmik_emu_mma(int MT, int KT, double* d, const double* a,
                           const double* b)
{
    const int tid = gimmik_emu::linear_tid(), lane = tid % 32;
    gimmik_emu::Warp& w = gimmik_emu::warps[tid / 32];
    const int na = MT*KT/32, nb = KT/4, nc = MT/4;
    for (int i = 0; i < na; ++i) w.a[lane][i] = a[i];
    for (int i = 0; i < nb; ++i) w.b[lane][i] = b[i];
    w.bar->arrive_and_wait();
    double A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l)
    {
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < na; ++i)
        {
            if (MT == 8)
                A[g][t] = w.a[l][i];
            else
                A[g + 8*(i % 2)][t + 4*(i / 2)] = w.a[l][i];
        }
        for (int i = 0; i < nb; ++i)
            B[t + 4*i][g] = w.b[l][i];
    }
    w.bar->arrive_and_wait();
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < nc; ++i)
    {
        const int r = MT == 8 ? g : g + 8*(i / 2);
        const int c = MT == 8 ? 2*t + i : 2*t + i % 2;
        for (int k = 0; k < KT; ++k)
            d[i] += A[r][k]*B[k][c];
    }
}

namespace gimmik_emu {

static int launch(void (*kernel)(void**), void** args, const int* grid,
                  const int* block, char* msg, int len)
{
    const int nthreads = block[0]*block[1]*block[2];
    if (nthreads > 1024)
    {
        snprintf(msg, len, "a block of %d threads", nthreads);
        return 1;
    }
    for (auto& w : warps)
        if (!w.bar)
            w.bar = new std::barrier<>(32);
    blockDim = {(unsigned) block[0], (unsigned) block[1], (unsigned) block[2]};
    gridDim = {(unsigned) grid[0], (unsigned) grid[1], (unsigned) grid[2]};
    for (int z = 0; z < grid[2]; ++z)
        for (int y = 0; y < grid[1]; ++y)
            for (int x = 0; x < grid[0]; ++x)
            {
                std::memset(__start_gimmik_smem, 0xff,
                            __stop_gimmik_smem - __start_gimmik_smem);
                std::barrier<> bar(nthreads);
                block_barrier = &bar;
                std::vector<std::thread> th;
                for (int t = 0; t < nthreads; ++t)
                    th.emplace_back([=] {
                        threadIdx = {(unsigned) (t % block[0]),
                                     (unsigned) (t / block[0] % block[1]),
                                     (unsigned) (t / (block[0]*block[1]))};
                        blockIdx = {(unsigned) x, (unsigned) y, (unsigned) z};
                        kernel(args);
                    });
                for (auto& t : th)
                    t.join();
            }
    msg[0] = '\0';
    return 0;
}

}  // namespace gimmik_emu

#define GIMMIK_EMU_ENTRY(call)                                              \
    extern "C" int gimmik_emu_entry(void **args, const int *grid,          \
                                    const int *block, char *msg, int len)  \
    {                                                                       \
        return gimmik_emu::launch(call, args, grid, block, msg, len);      \
    }
