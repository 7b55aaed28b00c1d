## The helpers of the CUDA tensor-core families, included as a namespace
## (<%namespace name="mma" file="mma-lib.mako"/>).  Each helper's inline PTX
## has an emulation hook: with GIMMIK_EMULATE defined (gimmik.emulate's
## cuda_shim.h) the mma and cp16 helpers call gimmik_emu_mma and
## gimmik_emu_cp16, and GIMMIK_CP_ASYNC, unless the includer defined it,
## issues a cp.async group operation.

## D = A*B + D on one f64 tile of `shape` (mt x 8 x kt): d holds nc
## accumulators, a na and b nb fragment values of a lane.
<%def name="mma_fn(shape, mt, kt, na, nb, nc)">\
<%
    ops = ', '.join(f'%{i}' for i in range(nc))
    aops = ', '.join(f'%{nc + i}' for i in range(na))
    bops = ', '.join(f'%{nc + na + i}' for i in range(nb))
    dcons = ', '.join(f'"+d"(d[{i}])' for i in range(nc))
    acons = ', '.join(f'"d"(a[{i}])' for i in range(na))
    bcons = ', '.join(f'"d"(b[{i}])' for i in range(nb))
%>\
// D = A*B + D on one ${shape} f64 tile (fragments: see the generator).
static __device__ __forceinline__ void
${kname}_mma(double* d, const double* a, const double* b)
{
#ifdef GIMMIK_EMULATE
    gimmik_emu_mma(${mt}, ${kt}, d, a, b);
#else
    asm("mma.sync.aligned.${shape}.row.col.f64.f64.f64.f64 "
        "{${ops}}, {${aops}}, {${bops}}, {${ops}};"
        : ${dcons} : ${acons}, ${bcons});
#endif
}
</%def>

## 16 bytes global -> shared, and the cp.async group operations.
<%def name="cp_async()">\
#ifndef GIMMIK_CP_ASYNC
#define GIMMIK_CP_ASYNC(op) asm volatile("cp.async." op ";" ::: "memory")
#endif

// 16 bytes global -> shared, asynchronously; bytes < 16 zero-fills the rest.
static __device__ __forceinline__ void
${kname}_cp16(double* dst, const double* src, int bytes)
{
#ifdef GIMMIK_EMULATE
    gimmik_emu_cp16(dst, src, bytes);
#else
    const unsigned s = (unsigned) __cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(s), "l"(src), "r"(bytes) : "memory");
#endif
}
</%def>

## Store accumulators a0, a1 of row `row` (in scope; rowoff, its offset in
## C) at column `col` (an expression) of C, adding beta*C unless `addc` is
## False (C already in the accumulators, or beta 0); a ragged last column
## gets a0 alone.
<%def name="store_pair(col, a0, a1, addc, indent, rowoff='row*ldcl')">\
<%
    cs = f'__ldcs(c + {rowoff} + col)'
    if not addc or beta == 0:
        e0, e1, s0 = a0, a1, a0
    elif beta == 1:
        e0, e1, s0 = f'{a0} + cv.x', f'{a1} + cv.y', f'{a0} + {cs}'
    else:
        e0, e1 = f'{a0} + {betalit}*cv.x', f'{a1} + {betalit}*cv.y'
        s0 = f'{a0} + {betalit}*{cs}'
    i = indent
%>\
${i}{
${i}    const int col = ${col};
${i}    if (col + 1 < n)
${i}    {
% if addc and beta != 0:
${i}        const double2 cv = __ldcs((const double2*)(c + ${rowoff} + col));
% endif
${i}        ${st_fn}((double2*)(c + ${rowoff} + col), double2{${e0}, ${e1}});
${i}    }
${i}    else if (col < n)
${i}        ${st_fn}(c + ${rowoff} + col, ${s0});
${i}}
</%def>

## Load beta*C of row `row` (in scope; rowoff, its offset in C; rows from
## m on read nothing) at column `col` (an expression) into a0, a1 (zero
## where outside C); a ragged last column fills a0 alone.
<%def name="load_pair(col, a0, a1, indent, rowoff='row*ldcl')">\
<%
    sc = '' if beta == 1 else f'{betalit}*'
    i = indent
%>\
${i}{
${i}    const int col = ${col};
${i}    ${a0} = ${a1} = 0.0;
${i}    if (row < ${m} && col + 1 < n)
${i}    {
${i}        const double2 cv = __ldcs((const double2*)(c + ${rowoff} + col));
${i}        ${a0} = ${sc}cv.x;
${i}        ${a1} = ${sc}cv.y;
${i}    }
${i}    else if (row < ${m} && col < n)
${i}        ${a0} = ${sc}__ldcs(c + ${rowoff} + col);
${i}}
</%def>
