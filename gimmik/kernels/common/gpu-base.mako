## What the HIP and CUDA bases (kernels/hip/base.mako, kernels/cuda/base.mako)
## share: the header, the kernel prologue (baked or runtime n), C's final
## values and the column guards.  A platform's base inherits this and
## defines preamble() (its vector types), launch_bounds(), vt(w), load_b,
## load_c and store_c, and FIRST: how the first column of a two-column value
## is named.
// gimmik ${tplname} kernel: C = A*B${'' if beta == 0 else ' + beta*C'}, A ${m}x${k}, ${dtype}
${self.preamble()}\

${next.body()}

## Signature and prologue: defines n, ldbl and ldcl (row strides, 64-bit).
<%def name="prologue()">\
${self.kernel_head()}
% if n is not None:
${kname}(${self.gq()}const ${dtype}* __restrict__ b${self.arg_attr(0)}, ${self.gq()}${dtype}* __restrict__ c${self.arg_attr(1)}${self.extra_params()})
{
    const int n = ${n};
    const long ldbl = ${ldb}, ldcl = ${ldc};
% else:
${kname}(int n, ${self.gq()}const ${dtype}* __restrict__ b, int ldb,
${' '*len(kname)} ${self.gq()}${dtype}* __restrict__ c, int ldc)
{
    const long ldbl = ldb, ldcl = ldc;
% endif
</%def>

## The kernel's declaration up to its name (HIP and CUDA: an extern "C"
## __global__ function with launch bounds).
<%def name="kernel_head()" buffered="True">extern "C" __global__ ${self.kernel_attributes()}void __launch_bounds__(${self.launch_bounds()})</%def>

## Attributes of the kernel function before its return type (each with a
## trailing space); a platform's base may define them, none by default.
<%def name="kernel_attributes()" buffered="True"></%def>

## The address space of B and C pointers (with a trailing space; none on
## HIP and CUDA).
<%def name="gq()" buffered="True"></%def>

## What follows a pointer argument's name (its binding; none on HIP and
## CUDA), and parameters after C (none on HIP and CUDA).
<%def name="arg_attr(i)" buffered="True"></%def>
<%def name="extra_params()" buffered="True"></%def>

## A w-column value of zeros.
<%def name="zero(w)" buffered="True">${self.vt(w)}{}</%def>

## Lines no instruction is moved across (by the compiler's scheduler or by
## its hoisting of code common to the cases of a switch); a platform's base
## may define them, none by default.
<%def name="sched_fence()" buffered="True"></%def>

## Address of row `row` (stride ld), column offset col of panel a, as a
## pointer to a w-column value.
<%def name="ptr(a, row, ld, col, w)" buffered="True">\
% if w == 1:
(${a} + ${row}*${ld} + ${col})\
% else:
(${self.gq()}${'const ' if a == 'b' else ''}${self.vt(2)}*)(${a} + ${row}*${ld} + ${col})\
% endif
</%def>

## x times beta, as C's old values enter a sum (beta = 1: x itself).
<%def name="beta_scaled(x)" buffered="True">${x if beta == 1 else betalit + '*' + x}</%def>

## Final value of row i of C from an accumulator expression (None: A's row i
## is zero).  Emits nothing when beta = 1 and the row is zero.  cold: the
## name of C's old value where the family has loaded it, else it is loaded
## here.
<%def name="finish(i, col, w, acc, cold=None)">\
<%
    old = cold or self.load_c(i, col, w)
%>\
% if beta == 0:
        ${self.store_c(i, col, w, acc if acc is not None else self.zero(w))};
% elif acc is None and beta == 1:
% elif acc is None:
        ${self.store_c(i, col, w, betalit + '*' + old)};
% elif beta == 1:
        ${self.store_c(i, col, w, acc + ' + ' + old)};
% else:
        ${self.store_c(i, col, w, acc + ' + ' + betalit + '*' + old)};
% endif
</%def>

## body(w) for a thread's columns from col: with w 2, body(2) where both
## columns are inside n and body(1) on a ragged last column; with w 1,
## body(1) where col is inside n.
<%def name="guarded(body, w, indent='        ')">\
% if w == 2:
${indent}if (col + 1 < n)
${indent}{
${body(2)}\
${indent}}
${indent}else if (col < n)
${indent}{
${body(1)}\
${indent}}
% else:
${indent}if (col < n)
${indent}{
${body(1)}\
${indent}}
% endif
</%def>

## One thread per column group: col is its first column.  Each family
## defines columns(w), the body for a w-column group at offset col.
<%def name="per_column()">\
    const int col = ${width}*(blockIdx.x*blockDim.x + threadIdx.x);
${self.guarded(self.columns, width, '    ')}\
</%def>

## Run-time n where a client's grid of ceil(n/block[0]) blocks can be
## smaller than the launch contract's (walk_tiles: row groups, or tiles
## narrower than block[0]): the block walks the contract's blocks vb from
## blockIdx.x in steps of gridDim.x, so any grid leaves no tile undone.
## Templates decode ${bid} (vb there, else blockIdx.x).
<%def name="tiles_open()">\
% if walk_tiles:
    const long ntiles = ${tile_groups}L*((n + ${tile_cols - 1}L)/${tile_cols});
    for (long vb = blockIdx.x; vb < ntiles; vb += gridDim.x)
    {
% endif
</%def>

## The walk's end; a barrier first where the block's shared memory is
## written again by its next tile.
<%def name="tiles_close()">\
% if walk_tiles:
% if tile_barrier:
    __syncthreads();
% endif
    }
% endif
</%def>
