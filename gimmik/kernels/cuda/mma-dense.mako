<%inherit file="base.mako"/>
## mma-dense: f64 on the FP64 tensor cores (mma.sync m8n8k4).  The block's
## warps form an mwarps x nwarps grid: warp row wy owns plan.mw m-tiles from
## wy*mw, warp column wx owns ntile 8-column n-tiles.  B is staged through
## shared memory in k-stages of plan.rows rows with cp.async, double
## buffered, in a loop over the stages; A comes from a table of baked
## fragments (plan.frags, [k-tile][m-tile][lane]), one coalesced 8-byte load
## per lane and mma-tile, shared by the ntile n-tiles.
<%
    P = plan
    NB, R, S = P.cols, P.rows, P.stride
    nchunk = R*NB//2
    nmtp = P.frags.shape[1]
    accs = [f'acc{a}_{t}_{i}' for a in range(P.mw) for t in range(P.ntile) for i in range(2)]
%>\
static __device__ const double ${kname}_afrag[${P.frags.size}] = {
% for row in P.frags.reshape(-1, 8):
    ${', '.join(lit(v) for v in row)},
% endfor
};

// D = A*B + D on one 8x8x4 f64 tile; lane holds a = A[g][t], b = B[t][g],
// d = D[g][2t], D[g][2t + 1] with g = lane/4, t = lane%4.
static __device__ __forceinline__ void
${kname}_mma(double& d0, double& d1, double a, double b)
{
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 "
        "{%0, %1}, {%2}, {%3}, {%0, %1};"
        : "+d"(d0), "+d"(d1) : "d"(a), "d"(b));
}

// 16 bytes global -> shared, asynchronously; bytes < 16 zero-fills the rest.
static __device__ __forceinline__ void
${kname}_cp16(double* dst, const double* src, int bytes)
{
    const unsigned s = (unsigned) __cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(s), "l"(src), "r"(bytes) : "memory");
}

<%def name="stage_load(s, buf)">\
% for it in range(-(-nchunk // nthreads)):
        {
            const int idx = tid + ${it*nthreads};
% if (it + 1)*nthreads > nchunk:
            if (idx < ${nchunk})
% endif
            {
                const int r = idx / ${NB//2}, cc = 2*(idx % ${NB//2});
                const int row = ${s}*${R} + r, col = col0 + cc;
                const int nb = (row < ${k} && col < n) ? (col + 1 < n ? 16 : 8) : 0;
                ${kname}_cp16(&bsh[${buf}][r][cc], nb ? b + row*ldbl + col : b, nb);
            }
        }
% endfor
        asm volatile("cp.async.commit_group;" ::: "memory");
</%def>
${self.prologue()}\
    __shared__ __align__(16) double bsh[2][${R}][${S}];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t4 = lane % 4;
    const int col0 = blockIdx.x*${NB};
    const int wy = warp / ${P.nwarps}, wx = warp % ${P.nwarps};
    const int bcol = wx*${8*P.ntile} + g;
    const int ccol = col0 + wx*${8*P.ntile} + 2*t4;
    const double* __restrict__ afrag = ${kname}_afrag + wy*${32*P.mw} + lane;
    double ${', '.join(f'{x} = 0' for x in accs)};

${stage_load(0, 0)}\
#pragma unroll 1
    for (int s = 0; s < ${P.nstages}; ++s)
    {
        if (s + 1 < ${P.nstages})
        {
${stage_load('(s + 1)', '(s + 1) & 1')}\
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        }
        else
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        __syncthreads();

        const double* bs = &bsh[s & 1][t4][bcol];
        const double* as = afrag + s*${P.kstage*nmtp*32};
% for kk in range(P.kstage):
        {
% for t in range(P.ntile):
            const double b${t} = bs[${kk*4*S + 8*t}];
% endfor
% for a in range(P.mw):
            {
                const double af = __ldg(as + ${(kk*nmtp + a)*32});
% for t in range(P.ntile):
                ${kname}_mma(acc${a}_${t}_0, acc${a}_${t}_1, af, b${t});
% endfor
            }
% endfor
        }
% endfor
        __syncthreads();
    }

% for a in range(P.mw):
    if ((wy*${P.mw} + ${a})*8 + g < ${m})
    {
        const long row = (wy*${P.mw} + ${a})*8 + g;
% for t in range(P.ntile):
<%
    a0, a1 = f'acc{a}_{t}_0', f'acc{a}_{t}_1'
    cs = '__ldcs(c + row*ldcl + col)'
    if beta == 0:
        e0, e1, s0 = a0, a1, a0
    elif beta == 1:
        e0, e1, s0 = f'{a0} + cv.x', f'{a1} + cv.y', f'{a0} + {cs}'
    else:
        e0, e1 = f'{a0} + {betalit}*cv.x', f'{a1} + {betalit}*cv.y'
        s0 = f'{a0} + {betalit}*{cs}'
%>\
        {
            const int col = ccol + ${8*t};
            if (col + 1 < n)
            {
% if beta != 0:
                const double2 cv = __ldcs((const double2*)(c + row*ldcl + col));
% endif
                __stcs((double2*)(c + row*ldcl + col), double2{${e0}, ${e1}});
            }
            else if (col < n)
                __stcs(c + row*ldcl + col, ${s0});
        }
% endfor
    }
% endfor
}
