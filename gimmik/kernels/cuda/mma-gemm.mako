<%inherit file="base.mako"/>
## mma-gemm: f64 on the FP64 tensor cores with 2-D block tiling.  Block
## blockIdx.x computes the BM x BN tile of C of m-block blockIdx.x % nmb and
## column block blockIdx.x / nmb.  The k loop runs over plan.nstages stages
## of BK rows: the stage's slice of the baked A table (contiguous per
## m-block and stage) and BK x BN of B go to shared memory with cp.async,
## plan.nbuf stages deep, one __syncthreads per stage.  Where A has zero
## BM x BK slabs an m-block runs only its live stages (kidx, cnt; with
## params skip).  Warp (wy, wx) owns wm m-tiles and wn 8-column n-tiles;
## accumulators stay in registers; with params cpre they start from beta*C,
## loaded before the k loop, else beta*C is added at the end.  With params
## tiles T a block computes T column tiles in turn, its stage pipeline
## running on from one tile into the next (the next tile's first stages
## load while the last ones compute and the tile's C is stored).
## Fragment layouts and the table order: gimmik/cuda.py (gemm_coords,
## GemmPlan).
<%
    P = plan
    MT, KT, NA, NB, NC, V = P.MT, P.KT, P.na, P.nb, P.nc, P.v
    BM, BN, BK, S = P.BM, P.BN, P.BK, P.stride
    NBUF, NST = P.nbuf, P.nstages
    achunks = BM*BK//2
    bchunks = BK*BN//2
    shape = P.shape
    ops = ', '.join(f'%{i}' for i in range(NC))
    aops = ', '.join(f'%{NC + i}' for i in range(NA))
    bops = ', '.join(f'%{NC + NA + i}' for i in range(NB))
    dcons = ', '.join(f'"+d"(d[{i}])' for i in range(NC))
    acons = ', '.join(f'"d"(a[{i}])' for i in range(NA))
    bcons = ', '.join(f'"d"(b[{i}])' for i in range(NB))
    kpad = NST*BK > k
    full = P.full
    NSL = P.nslot
    T = P.tiles
%>\
static __device__ __align__(16) const double ${kname}_atab[${P.table.size}] = {
% for row in P.table.reshape(-1, 8):
    ${', '.join(lit(x) for x in row)},
% endfor
};

% if not full:
// per m-block: live stages (k index of each slot) and their count
static __constant__ short ${kname}_kidx[${P.kidx.size}] = {${', '.join(str(int(x)) for x in P.kidx.reshape(-1))}};
static __constant__ short ${kname}_cnt[${P.nmb}] = {${', '.join(str(int(x)) for x in P.cnt)}};
% endif

// D = A*B + D on one ${shape} f64 tile (fragments: see the generator).
static __device__ __forceinline__ void
${kname}_mma(double* d, const double* a, const double* b)
{
    asm("mma.sync.aligned.${shape}.row.col.f64.f64.f64.f64 "
        "{${ops}}, {${aops}}, {${bops}}, {${ops}};"
        : ${dcons} : ${acons}, ${bcons});
}

// 16 bytes global -> shared, asynchronously; bytes < 16 zero-fills the rest.
static __device__ __forceinline__ void
${kname}_cp16(double* dst, const double* src, int bytes)
{
    const unsigned s = (unsigned) __cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(s), "l"(src), "r"(bytes) : "memory");
}

<%def name="stage_load(s, kst, buf, cbase='col0')">\
% for it in range(-(-achunks // nthreads)):
            {
                const int idx = tid + ${it*nthreads};
% if (it + 1)*nthreads > achunks:
                if (idx < ${achunks})
% endif
                ${kname}_cp16(&ash[${buf}][2*idx], atab + ${s}*${BM*BK} + 2*idx, 16);
            }
% endfor
% for it in range(-(-bchunks // nthreads)):
            {
                const int idx = tid + ${it*nthreads};
% if (it + 1)*nthreads > bchunks:
                if (idx < ${bchunks})
% endif
                {
                    const int r = idx / ${BN//2}, cc = 2*(idx % ${BN//2});
                    const int row = ${kst}*${BK} + r, col = ${cbase} + cc;
% if kpad:
                    const int nb = (row < ${k} && col < n) ? (col + 1 < n ? 16 : 8) : 0;
% else:
                    const int nb = col < n ? (col + 1 < n ? 16 : 8) : 0;
% endif
                    ${kname}_cp16(&bsh[${buf}][r][cc], nb ? b + row*ldbl + col : b, nb);
                }
            }
% endfor
</%def>
<%def name="init_acc()">\
% if beta == 0 or not P.cpre:
#pragma unroll
    for (int i = 0; i < ${P.wm}; ++i)
#pragma unroll
        for (int j = 0; j < ${P.wn}; ++j)
#pragma unroll
            for (int q = 0; q < ${NC}; ++q)
                acc[i][j][q] = 0.0;
% else:
% for mt in range(P.wm):
% for h in range(NC // 2):
    {
        const int row = mb*${BM} + (wy*${P.wm} + ${mt})*${MT} + ${8*h} + g;
% for nt in range(P.wn):
<%
    a0, a1 = f'acc[{mt}][{nt}][{2*h}]', f'acc[{mt}][{nt}][{2*h + 1}]'
    sc = '' if beta == 1 else f'{betalit}*'
%>\
        {
            const int col = col0 + wx*${8*P.wn} + ${8*nt} + 2*t4;
            ${a0} = ${a1} = 0.0;
            if (row < ${m} && col + 1 < n)
            {
                const double2 cv = __ldcs((const double2*)(c + row*ldcl + col));
                ${a0} = ${sc}cv.x;
                ${a1} = ${sc}cv.y;
            }
            else if (row < ${m} && col < n)
                ${a0} = ${sc}__ldcs(c + row*ldcl + col);
        }
% endfor
    }
% endfor
% endfor
% endif

</%def>
<%def name="epilogue()">\
% for mt in range(P.wm):
% for h in range(NC // 2):
    {
        const int row = mb*${BM} + (wy*${P.wm} + ${mt})*${MT} + ${8*h} + g;
        if (row < ${m})
        {
% for nt in range(P.wn):
<%
    a0, a1 = f'acc[{mt}][{nt}][{2*h}]', f'acc[{mt}][{nt}][{2*h + 1}]'
    cs = '__ldcs(c + row*ldcl + col)'
    if beta == 0 or P.cpre:
        e0, e1, s0 = a0, a1, a0
    elif beta == 1:
        e0, e1, s0 = f'{a0} + cv.x', f'{a1} + cv.y', f'{a0} + {cs}'
    else:
        e0, e1 = f'{a0} + {betalit}*cv.x', f'{a1} + {betalit}*cv.y'
        s0 = f'{a0} + {betalit}*{cs}'
%>\
            {
                const int col = col0 + wx*${8*P.wn} + ${8*nt} + 2*t4;
                if (col + 1 < n)
                {
% if beta != 0 and not P.cpre:
                    const double2 cv = __ldcs((const double2*)(c + row*ldcl + col));
% endif
                    __stcs((double2*)(c + row*ldcl + col), double2{${e0}, ${e1}});
                }
                else if (col < n)
                    __stcs(c + row*ldcl + col, ${s0});
            }
% endfor
        }
    }
% endfor
% endfor
</%def>
<%def name="compute()">\
        const int buf = it % ${NBUF};
        const double* as = &ash[buf][${P.a_offset(0, 0, 0, 0, 0)} + wy*${P.a_offset(0, 1, 0, 0, 0)} + lane*${V}];
        const double* bs = &bsh[buf][t4][wx*${8*P.wn} + g];
% for ks in range(P.kstage):
        {
            double a[${P.wm}][${NA}], b[${P.wn}][${NB}];
% for mt in range(P.wm):
% for j in range(NA // V):
<% off = P.a_offset(0, 0, ks, mt, j) %>\
% if V == 2:
            {
                const double2 x = *(const double2*)(as + ${off});
                a[${mt}][${2*j}] = x.x;
                a[${mt}][${2*j + 1}] = x.y;
            }
% else:
            a[${mt}][${j}] = as[${off}];
% endif
% endfor
% endfor
% for nt in range(P.wn):
% for i in range(NB):
            b[${nt}][${i}] = bs[${(ks*KT + 4*i)*S + 8*nt}];
% endfor
% endfor
% for mt in range(P.wm):
% for nt in range(P.wn):
            ${kname}_mma(acc[${mt}][${nt}], a[${mt}], b[${nt}]);
% endfor
% endfor
        }
% endfor
</%def>
${self.prologue()}\
    __shared__ __align__(16) double ash[${NBUF}][${BM*BK}];
    __shared__ __align__(16) double bsh[${NBUF}][${BK}][${S}];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t4 = lane % 4;
    const int wy = warp / ${P.nwarps}, wx = warp % ${P.nwarps};
    const int mb = blockIdx.x % ${P.nmb};
% if T == 1:
    const int col0 = (blockIdx.x / ${P.nmb})*${BN};
% else:
    const int cb0 = (blockIdx.x / ${P.nmb})*${T*BN};
% endif
    const double* __restrict__ atab = ${kname}_atab + mb*${NSL*BM*BK};
% if full:
    const int nst = ${NST};
% else:
    const int nst = ${kname}_cnt[mb];
    const short* kidx = ${kname}_kidx + mb*${NSL};
% endif
    double acc[${P.wm}][${P.wn}][${NC}];
% if T == 1:
${init_acc()}
% else:
    const int nit = ${T}*nst;
% endif

% for s in range(NBUF - 1):
% if T == 1 and s < NST and full:
        {
${stage_load(s, s, s)}\
        }
% elif T == 1 and s < NSL:
        if (${s} < nst)
        {
            const int kst = kidx[${s}];
${stage_load(s, 'kst', s)}\
        }
% elif T > 1:
        if (${s} < nit)
        {
            const int tl = ${s} / nst, sl = ${s} - tl*nst;
% if full:
${stage_load('sl', 'sl', s, f'(cb0 + tl*{BN})')}\
% else:
            const int kst = kidx[sl];
${stage_load('sl', 'kst', s, f'(cb0 + tl*{BN})')}\
% endif
        }
% endif
    asm volatile("cp.async.commit_group;" ::: "memory");
% endfor

% if T == 1:
#pragma unroll 1
    for (int s = 0; s < nst; ++s)
    {
        const int it = s;
        asm volatile("cp.async.wait_group ${NBUF - 2};" ::: "memory");
        __syncthreads();
        {
            const int sn = s + ${NBUF - 1};
            if (sn < nst)
            {
                const int bn = sn % ${NBUF};
% if full:
${stage_load('sn', 'sn', 'bn')}\
% else:
                const int kst = kidx[sn];
${stage_load('sn', 'kst', 'bn')}\
% endif
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
${compute()}\
    }

${epilogue()}\
% else:
#pragma unroll 1
    for (int tile = 0; tile < ${T}; ++tile)
    {
    const int col0 = cb0 + tile*${BN};
${init_acc()}
#pragma unroll 1
    for (int s = 0; s < nst; ++s)
    {
        const int it = tile*nst + s;
        asm volatile("cp.async.wait_group ${NBUF - 2};" ::: "memory");
        __syncthreads();
        {
            const int sn = it + ${NBUF - 1};
            if (sn < nit)
            {
                const int bn = sn % ${NBUF};
                const int tl = sn / nst, sl = sn - tl*nst;
% if full:
${stage_load('sl', 'sl', 'bn', f'(cb0 + tl*{BN})')}\
% else:
                const int kst = kidx[sl];
${stage_load('sl', 'kst', 'bn', f'(cb0 + tl*{BN})')}\
% endif
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
${compute()}\
    }

${epilogue()}\
    }
% endif
}
