## The one CUDA base every family inherits: a header, two-column vector
## arithmetic, the kernel prologue (baked or runtime n) and the load/store
## helpers.  The streaming families (kernels/common/) are shared with HIP:
## what differs is here, FIRST being how the first column of a two-column
## value is named.
<%!
    FIRST = '.x'
%>\
// gimmik ${tplname} kernel: C = A*B${'' if beta == 0 else ' + beta*C'}, A ${m}x${k}, ${dtype}
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

${next.body()}

## Signature and prologue: defines n, ldbl and ldcl (row strides, 64-bit).
## minblocks (blocks per SM to fit) lets ptxas use registers up to
## 64K/(nthreads*minblocks).
<%def name="prologue()">\
extern "C" __global__ void __launch_bounds__(${nthreads}${f", {minblocks}" if minblocks else ""})
% if n is not None:
${kname}(const ${dtype}* __restrict__ b, ${dtype}* __restrict__ c)
{
    const int n = ${n};
    const long ldbl = ${ldb}, ldcl = ${ldc};
% else:
${kname}(int n, const ${dtype}* __restrict__ b, int ldb,
${' '*len(kname)} ${dtype}* __restrict__ c, int ldc)
{
    const long ldbl = ldb, ldcl = ldc;
% endif
</%def>

## Value type of one thread's column group: scalar or two columns.
<%def name="vt(w)" buffered="True">${dtype if w == 1 else dtype + '2'}</%def>

## B element(s) at row j (a literal) and column offset col (an expression):
## ld 'nc' reads through the read-only path, 'cs' and 'reload' evict first.
## (nt, the HIP families' non-temporal load flag, is not used: ld decides.)
<%def name="load_b(j, col, w, nt=False)" buffered="True">\
% if ld == 'nc':
__ldg(${ptr('b', j, 'ldbl', col, w)})\
% else:
__ldcs(${ptr('b', j, 'ldbl', col, w)})\
% endif
</%def>

<%def name="load_c(i, col, w)" buffered="True">__ldcs(${ptr('c', i, 'ldcl', col, w)})</%def>

## C is written once and not read back by this kernel: store evict-first.
<%def name="store_c(i, col, w, val)" buffered="True">__stcs(${ptr('c', i, 'ldcl', col, w)}, ${val})</%def>

<%def name="ptr(a, row, ld, col, w)" buffered="True">\
% if w == 1:
(${a} + ${row}*${ld} + ${col})\
% else:
(${'const ' if a == 'b' else ''}${dtype}2*)(${a} + ${row}*${ld} + ${col})\
% endif
</%def>

## Final value of row i of C from an accumulator expression (None: A's row i
## is zero).  Emits nothing when beta = 1 and the row is zero.
<%def name="finish(i, col, w, acc)">\
% if beta == 0:
        ${store_c(i, col, w, acc if acc is not None else vt(w) + '{}')};
% elif acc is None and beta == 1:
% elif acc is None:
        ${store_c(i, col, w, betalit + '*' + load_c(i, col, w))};
% elif beta == 1:
        ${store_c(i, col, w, acc + ' + ' + load_c(i, col, w))};
% else:
        ${store_c(i, col, w, acc + ' + ' + betalit + '*' + load_c(i, col, w))};
% endif
</%def>

## One thread per column group: col is its first column; with width 2 a
## ragged last column falls back to the scalar body.  Each family defines
## columns(w), the body for a w-column group at offset col.
<%def name="per_column()">\
    const int col = ${width}*(blockIdx.x*blockDim.x + threadIdx.x);
% if width == 2:
    if (col + 1 < n)
    {
${self.columns(2)}\
    }
    else if (col < n)
    {
${self.columns(1)}\
    }
% else:
    if (col < n)
    {
${self.columns(1)}\
    }
% endif
</%def>
