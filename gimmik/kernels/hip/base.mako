## The one HIP base every family inherits: a header, the vector type, the
## kernel prologue (baked or runtime n) and the load/store helpers.  The
## streaming families (kernels/common/) are shared with CUDA: what differs is
## here, FIRST being how the first column of a two-column value is named.
<%!
    FIRST = '[0]'
%>\
// gimmik ${tplname} kernel: C = A*B${'' if beta == 0 else ' + beta*C'}, A ${m}x${k}, ${dtype}
typedef ${dtype} gimmik_v2 __attribute__((vector_size(${2*itemsize})));

${next.body()}

## Signature and prologue: defines n, ldbl and ldcl (row strides, 64-bit).
<%def name="prologue()">\
extern "C" __global__ void __launch_bounds__(${nthreads})
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
<%def name="vt(w)" buffered="True">${dtype if w == 1 else 'gimmik_v2'}</%def>

## B element(s) at row j (a literal) and column offset col (an expression).
<%def name="load_b(j, col, w, nt=False)" buffered="True">\
% if nt:
__builtin_nontemporal_load(${ptr('b', j, 'ldbl', col, w)})\
% else:
*${ptr('b', j, 'ldbl', col, w)}\
% endif
</%def>

<%def name="load_c(i, col, w)" buffered="True">(*${ptr('c', i, 'ldcl', col, w)})</%def>

## C is written once and not read back by this kernel: store non-temporally.
<%def name="store_c(i, col, w, val)" buffered="True">__builtin_nontemporal_store(${val}, ${ptr('c', i, 'ldcl', col, w)})</%def>

<%def name="ptr(a, row, ld, col, w)" buffered="True">\
% if w == 1:
(${a} + ${row}*${ld} + ${col})\
% else:
(${'const ' if a == 'b' else ''}gimmik_v2*)(${a} + ${row}*${ld} + ${col})\
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
