<%inherit file="gpu-base.mako"/>
## The HIP base every family inherits: what differs from CUDA in the shared
## GPU base (kernels/common/gpu-base.mako).
<%!
    FIRST = '[0]'
%>\
${next.body()}

<%def name="preamble()">\
typedef ${dtype} gimmik_v2 __attribute__((vector_size(${2*itemsize})));
</%def>

<%def name="launch_bounds()" buffered="True">${nthreads}</%def>

## Value type of one thread's column group: scalar or two columns.
<%def name="vt(w)" buffered="True">${dtype if w == 1 else 'gimmik_v2'}</%def>

## B element(s) at row j (a literal) and column offset col (an expression).
<%def name="load_b(j, col, w, nt=False)" buffered="True">\
% if nt:
__builtin_nontemporal_load(${self.ptr('b', j, 'ldbl', col, w)})\
% else:
*${self.ptr('b', j, 'ldbl', col, w)}\
% endif
</%def>

<%def name="load_c(i, col, w)" buffered="True">(*${self.ptr('c', i, 'ldcl', col, w)})</%def>

## C is written once and not read back by this kernel: store non-temporally.
<%def name="store_c(i, col, w, val)" buffered="True">__builtin_nontemporal_store(${val}, ${self.ptr('c', i, 'ldcl', col, w)})</%def>

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
