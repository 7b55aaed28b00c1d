<%inherit file="gpu-base.mako"/>
## The CUDA base every family inherits: what differs from HIP in the shared
## GPU base (kernels/common/gpu-base.mako).
<%!
    FIRST = '.x'
%>\
${next.body()}

## Two-column vector arithmetic on CUDA's float2/double2.
<%def name="preamble()">\
<%
    v2 = dtype + '2'
%>\
% if width == 2:
#ifndef GIMMIK_${v2.upper()}_OPS
#define GIMMIK_${v2.upper()}_OPS
static __device__ __forceinline__ ${v2} operator*(${dtype} a, ${v2} b)
{ return ${v2}{a*b.x, a*b.y}; }
static __device__ __forceinline__ ${v2} operator+(${v2} a, ${v2} b)
{ return ${v2}{a.x + b.x, a.y + b.y}; }
static __device__ __forceinline__ void operator+=(${v2}& a, ${v2} b)
{ a.x += b.x; a.y += b.y; }
#endif
% endif
</%def>

## minblocks (blocks per SM to fit) lets ptxas use registers up to
## 64K/(nthreads*minblocks).
<%def name="launch_bounds()" buffered="True">${nthreads}${f", {minblocks}" if minblocks else ""}</%def>

## Value type of one thread's column group: scalar or two columns.
<%def name="vt(w)" buffered="True">${dtype if w == 1 else dtype + '2'}</%def>

## B element(s) at row j (a literal) and column offset col (an expression):
## ld 'nc' reads through the read-only path, 'cg' caches in L2 only, 'cs'
## and 'reload' evict first, 'plain' is an ordinary load.
<%def name="load_b(j, col, w)" buffered="True">\
% if ld == 'nc':
__ldg(${self.ptr('b', j, 'ldbl', col, w)})\
% elif ld == 'cg':
__ldcg(${self.ptr('b', j, 'ldbl', col, w)})\
% elif ld == 'plain':
(*${self.ptr('b', j, 'ldbl', col, w)})\
% else:
__ldcs(${self.ptr('b', j, 'ldbl', col, w)})\
% endif
</%def>

<%def name="load_c(i, col, w)" buffered="True">__ldcs(${self.ptr('c', i, 'ldcl', col, w)})</%def>

## C is written once and not read back by this kernel: st_fn __stcg (st
## 'cg') caches it in L2 for the next kernel, __stcs stores it evict-first.
<%def name="store_c(i, col, w, val)" buffered="True">${st_fn}(${self.ptr('c', i, 'ldcl', col, w)}, ${val})</%def>

## A value the same in every lane of a warp (e.g. threadIdx.y).
<%def name="wave_uniform(x)" buffered="True">${x}</%def>
