<%inherit file="base.mako"/>
## rowblock: a looped kernel (A as tables, not unrolled code), so that it
## compiles in the same short time for any A.  Per block of columns, the used
## rows of B are first packed into a contiguous buffer (row stride padded so
## that power-of-two ldb cannot make them collide in the caches).  The rows
## of C then go in groups of ${plan.rows}; a group's accumulators,
## ${plan.rows} rows by ${vw} columns, stay in registers while the loop walks
## the packed rows the group uses.
<%
    R = plan.rows
    G = len(plan.ptr) - 1
    NB = max(1, len(plan.bix))
    p = kname
%>\
<%def name="preamble()">\
<%
    R = plan.rows
    p = kname
    VBYTES = vbytes
    VL = VBYTES // itemsize
    def ints(xs):
        return ', '.join(map(str, xs)) or '0'
%>
static const int ${p}_bix[${max(1, len(plan.bix))}] = {${ints(plan.bix)}};
static const int ${p}_ptr[${len(plan.ptr)}] = {${ints(plan.ptr)}};
static const int ${p}_col[${max(1, len(plan.cols))}] = {${ints(plan.cols)}};
static const ${dtype} ${p}_val[${max(1, len(plan.vals))}][${R}] = {
% for row in plan.vals:
    {${', '.join(lit(v) for v in row)}},
% endfor
% if not plan.vals:
    {0},
% endif
};

// ${VL}-wide vectors (GCC/Clang vector extensions), so that the register
// tile is explicit rather than left to the auto-vectoriser's whims
typedef ${dtype} ${p}_vec __attribute__((vector_size(${VBYTES})));

// Rows g*${R} .. g*${R} + ${R - 1} of C at columns s0 .. s0 + ${vw - 1} from packed
// B (bp at column s0, ${VBYTES}-byte aligned): ${R} x ${vw // VL} vector accumulators.
static inline __attribute__((always_inline)) void
${p}_tile(const ${dtype}* restrict bp, ${dtype}* restrict c, long ldcl,
${' '*len(p)}      int g, int s0)
{
    ${p}_vec acc[${R}][${vw // VL}];
    #pragma GCC unroll ${R}
    for (int r = 0; r < ${R}; r++)
        #pragma GCC unroll ${vw // VL}
        for (int v = 0; v < ${vw // VL}; v++)
            acc[r][v] = (${p}_vec){0};
    for (int t = ${p}_ptr[g]; t < ${p}_ptr[g + 1]; t++)
    {
        const ${p}_vec* bj = (const ${p}_vec*) (bp + ${p}_col[t]*${pstride});
        #pragma GCC unroll ${R}
        for (int r = 0; r < ${R}; r++)
        {
            const ${dtype} a = ${p}_val[t][r];
            #pragma GCC unroll ${vw // VL}
            for (int v = 0; v < ${vw // VL}; v++)
                acc[r][v] += a*bj[v];
        }
    }
    #pragma GCC unroll ${R}
    for (int r = 0; r < ${R}; r++)
    {
        const long i = (long) g*${R} + r;
% if m % R:
        if (i >= ${m})
            break;
% endif
        const ${dtype}* accr = (const ${dtype}*) acc[r];
        #pragma omp simd
        for (int w = 0; w < ${vw}; w++)
${self.finish('i', 's0 + w', 'accr[w]')}\
    }
}

// The same for the last, partial, tile of a block: nw < ${vw} columns.
static void
${p}_tail(const ${dtype}* restrict bp, ${dtype}* restrict c, long ldcl,
${' '*len(p)}      int g, int s0, int nw)
{
    ${dtype} acc[${R}][${vw}] = {{0}};
    for (int t = ${p}_ptr[g]; t < ${p}_ptr[g + 1]; t++)
        for (int r = 0; r < ${R}; r++)
            for (int w = 0; w < nw; w++)
                acc[r][w] += ${p}_val[t][r]*bp[${p}_col[t]*${pstride} + w];
    for (int r = 0; r < ${R}; r++)
    {
        const long i = (long) g*${R} + r;
% if m % R:
        if (i >= ${m})
            break;
% endif
        for (int w = 0; w < nw; w++)
${self.finish('i', 's0 + w', 'acc[r][w]')}\
    }
}
</%def>\
        ${dtype} bp[${NB}][${pstride}] __attribute__((aligned(64)));
        for (int p = 0; p < ${len(plan.bix)}; p++)
        {
            const ${dtype}* restrict bq = b + ${p}_bix[p]*ldbl;
            #pragma omp simd
            for (int col = c0; col < c1; col++)
                bp[p][col - c0] = bq[col];
        }

        // A group's tables stay in L1 across the block's tiles; the packed
        // block stays in L2 across the groups.
        for (int g = 0; g < ${G}; g++)
        {
            int s0 = c0;
            for (; c1 - s0 >= ${vw}; s0 += ${vw})   // s0 + ${vw} may overflow
                ${p}_tile(&bp[0][s0 - c0], c, ldcl, g, s0);
            if (s0 < c1)
                ${p}_tail(&bp[0][s0 - c0], c, ldcl, g, s0, c1 - s0);
        }
