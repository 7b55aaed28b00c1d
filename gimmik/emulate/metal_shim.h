// The CPU executor's Metal: the HIP shim's threads and threadgroup memory
// under the Metal Shading Language's names (a kernel's position arguments
// come from the shim's threadIdx, blockIdx, blockDim and gridDim), and
// float2 with the arithmetic the kernels use.
#include "hip_shim.h"

#define GIMMIK_EMULATE 1
#define kernel
#define device
#define threadgroup __shared__
#define threadgroup_barrier(flags) __syncthreads()

typedef gimmik_emu_dim3 uint3;

struct float2
{
    float x, y;
    float2() = default;
    explicit float2(float v) : x(v), y(v) {}
    float2(float a, float b) : x(a), y(b) {}
};
static inline float2 operator+(float2 a, float2 b) { return {a.x + b.x, a.y + b.y}; }
static inline float2 operator*(float a, float2 b) { return {a*b.x, a*b.y}; }
static inline float2& operator+=(float2& a, float2 b) { a.x += b.x; a.y += b.y; return a; }
