<%inherit file="gpu-base.mako"/>
## The Metal base every family inherits: the shared GPU base's names as the
## Metal Shading Language has them (the thread's position as kernel
## parameters, threadgroup memory and barriers), B and C device buffers 0
## and 1, n baked.  GIMMIK_EMULATE: compiled as C++ by the CPU executor
## (emulate/metal_shim.h), which defines these names itself.
<%!
    FIRST = '.x'
%>\
${next.body()}

<%def name="preamble()">\
#ifndef GIMMIK_EMULATE
#include <metal_stdlib>
using namespace metal;
#define __shared__ threadgroup
#define __restrict__
#define __syncthreads() threadgroup_barrier(mem_flags::mem_threadgroup)
#endif
</%def>

<%def name="kernel_head()" buffered="True">kernel void</%def>

<%def name="gq()" buffered="True">device </%def>

<%def name="arg_attr(i)" buffered="True"> [[buffer(${i})]]</%def>

<%def name="extra_params()" buffered="True">,
${' '*len(kname)} uint3 threadIdx [[thread_position_in_threadgroup]],
${' '*len(kname)} uint3 blockIdx [[threadgroup_position_in_grid]],
${' '*len(kname)} uint3 blockDim [[threads_per_threadgroup]],
${' '*len(kname)} uint3 gridDim [[threadgroups_per_grid]]</%def>

<%def name="zero(w)" buffered="True">${self.vt(w)}(0)</%def>

## Value type of one thread's column group: scalar or two columns.
<%def name="vt(w)" buffered="True">${dtype if w == 1 else dtype + '2'}</%def>

<%def name="load_b(j, col, w)" buffered="True">(*${self.ptr('b', j, 'ldbl', col, w)})</%def>

<%def name="load_c(i, col, w)" buffered="True">(*${self.ptr('c', i, 'ldcl', col, w)})</%def>

<%def name="store_c(i, col, w, val)" buffered="True">*${self.ptr('c', i, 'ldcl', col, w)} = ${val}</%def>

<%def name="wave_uniform(x)" buffered="True">${x}</%def>
