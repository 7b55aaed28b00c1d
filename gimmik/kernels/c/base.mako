## The one C base every family inherits: a header, the signature (baked or
## runtime n), the loop over column blocks shared out among OpenMP threads,
## and the store of a finished row of C.
// gimmik ${tplname} kernel (C): C = A*B${'' if beta == 0 else ' + beta*C'}, A ${m}x${k}, ${dtype}
// Columns are cut into blocks of ${width}; OpenMP threads share the blocks.
${self.preamble()}\

% if n is not None:
void ${kname}(const ${dtype}* restrict b, ${dtype}* restrict c)
{
    const int n = ${n};
    const long ldbl = ${ldb}, ldcl = ${ldc};
% else:
void ${kname}(int n, const ${dtype}* restrict b, int ldb,
${' '*len(kname)}  ${dtype}* restrict c, int ldc)
{
    const long ldbl = ldb, ldcl = ldc;
% endif
    // in 64 bits: n + ${width - 1} (and c0 + ${width}) overflow an int for n near 2**31
    const long nblocks = (n + ${width - 1}L) / ${width};

    #pragma omp parallel for schedule(static)
    for (long q = 0; q < nblocks; q++)
    {
        const int c0 = (int) (q*${width});
        const int c1 = (n - c0 > ${width}) ? c0 + ${width} : n;
${next.body()}\
    }
}

## Final value of row i of C at column `col` from an accumulator expression
## (None: A's row i is zero).  Emits nothing when beta = 1 and the row is
## zero.
<%def name="finish(i, col, acc)">\
% if beta == 0:
            c[${i}*ldcl + ${col}] = ${acc if acc is not None else '0'};
% elif acc is None and beta == 1:
% elif acc is None:
            c[${i}*ldcl + ${col}] *= ${betalit};
% elif beta == 1:
            c[${i}*ldcl + ${col}] += ${acc};
% else:
            c[${i}*ldcl + ${col}] = ${acc} + ${betalit}*c[${i}*ldcl + ${col}];
% endif
</%def>

## B at row j (a literal) and column col.
<%def name="load_b(j, col)" buffered="True">b[${j}*ldbl + ${col}]</%def>

## File-scope code a family needs before the kernel (tables, helpers).
<%def name="preamble()"></%def>
