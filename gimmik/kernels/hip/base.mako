<%inherit file="gpu-base.mako"/>
## The HIP base every family inherits: what differs from CUDA in the shared
## GPU base (kernels/common/gpu-base.mako).
<%!
    FIRST = '[0]'
%>\
${next.body()}

<%def name="preamble()">\
typedef ${dtype} gimmik_v2 __attribute__((vector_size(${2*itemsize})));
% if no_packed_f32:
// No packed f32 math in this kernel (where the compiler has it)
#ifndef GIMMIK_NO_PACKED_F32
#if defined(__AMDGCN__)
#define GIMMIK_NO_PACKED_F32 __attribute__((target("no-packed-fp32-ops")))
#else
#define GIMMIK_NO_PACKED_F32
#endif
#endif
% endif
</%def>

## no_packed_f32 (Family.no_packed_f32): clang-19 pairs
## scalar f32 values of different rows into packed FMAs, a pair holding
## a register whose load is still in flight waiting for all loads (f32
## bstream-msplit/width1 of a 33-column operator: 5 full waits on 26
## loads, 2 without; 120 to 58 VGPRs on another; bstream-mgroup likewise).
<%def name="kernel_attributes()" buffered="True">${'GIMMIK_NO_PACKED_F32 ' if no_packed_f32 else ''}</%def>

<%def name="launch_bounds()" buffered="True">${nthreads}</%def>

## No instruction is moved across it; the streaming families put one after
## each load batch, mfma-dense one after each step's MFMAs.  Without it clang-19 (gfx90a, gfx942) moves a batch's
## loads back next to their uses, one full s_waitcnt vmcnt(0) each, to fit
## more waves (bstream/width2 of p4-tri-m0: 14 such waits on 15 loads at 7
## waves; cstream/width2 of p2-tet-m6, beta 1: 16 on 54 at 6), moves
## bstream-mgroup's loads of a batch's later chunks after the LDS writes
## that wait for all loads, and hoists the loads the cases of a row-group
## switch share out of the switch, leaving each case its own wait for the
## rest.  Compilers without the builtin (ROCm 5.2's hiprtc) leave it out.
<%def name="sched_fence()" buffered="True">\
#if __has_builtin(__builtin_amdgcn_sched_barrier)
        __builtin_amdgcn_sched_barrier(0);
#endif
</%def>

## Value type of one thread's column group: scalar or two columns.
<%def name="vt(w)" buffered="True">${dtype if w == 1 else 'gimmik_v2'}</%def>

## B element(s) at row j (a literal) and column offset col (an expression).
## ld 'cs': a non-temporal load (B streams through once), else a plain one.
<%def name="load_b(j, col, w)" buffered="True">\
% if ld == 'cs':
__builtin_nontemporal_load(${self.ptr('b', j, 'ldbl', col, w)})\
% else:
*${self.ptr('b', j, 'ldbl', col, w)}\
% endif
</%def>

<%def name="load_c(i, col, w)" buffered="True">(*${self.ptr('c', i, 'ldcl', col, w)})</%def>

## C is written once and not read back by this kernel: store non-temporally.
## Under padded_tail (per_column) a two-column value whose second column may
## be past n stores its first column alone there.
<%def name="store_c(i, col, w, val)" buffered="True">\
<%
    st = '__builtin_nontemporal_store'
    ragged = (w == 2 and context.get('padded_tail')
              and (n is None or n % 2))
    first = self.attr.FIRST
%>\
% if ragged:
{
            const gimmik_v2 cfin = ${val};
            if (${col} + 1 < n)
                ${st}(cfin, ${self.ptr('c', i, 'ldcl', col, 2)});
            else
                ${st}(cfin${first}, ${self.ptr('c', i, 'ldcl', col, 1)});
        }\
% else:
${st}(${val}, ${self.ptr('c', i, 'ldcl', col, w)})\
% endif
</%def>

## padded_tail (the platform sets it for a family, at width 2): a thread
## whose first column is inside n runs the two-column body, loading both
## columns even where the second is past n: a row of B or C holds ldb or
## ldc >= n + 1 values there (both are even, width2_ok), so the load stays
## in the row.  Only stores look at the second column (store_c); the
## kernel has one copy of the body, not a second one-column copy whose
## loads wait apart.
<%def name="per_column()">\
% if context.get('padded_tail'):
    const int col = 2*(blockIdx.x*blockDim.x + threadIdx.x);
    if (col < n)
    {
${self.columns(2)}\
    }
% else:
${parent.per_column()}\
% endif
</%def>

## A value the same in every lane of a wavefront (e.g. threadIdx.y), made
## scalar: branches on it are then uniform (a switch compiles to scalar
## branches, not to every case in turn under exec masks) and selects on it
## are scalar.
<%def name="wave_uniform(x)" buffered="True">__builtin_amdgcn_readfirstlane(${x})</%def>

## Wait for every global load this thread has issued (s_waitcnt vmcnt(0),
## in the gfx9 encoding with expcnt and lgkmcnt at their maxima): code
## after it, in every branch, then needs no wait of its own for them.
## Placed at the end of the guarded block of its loads: after a block
## guarded by col < n, clang-19 duplicated a wait that follows it into
## both paths.
<%def name="wait_loads()" buffered="True">__builtin_amdgcn_s_waitcnt(0x0f70)</%def>
