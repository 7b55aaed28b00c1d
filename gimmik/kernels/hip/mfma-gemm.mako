<%inherit file="base.mako"/>
## mfma-gemm: f64 on the matrix cores with 2-D block tiling (plan: see
## gimmik/fragments/mfma_tiled.py).  Block blockIdx.x computes the BM x BN tile of C of
## m-block blockIdx.x % nmb and column block blockIdx.x / nmb.  Per live
## stage of its m-block: the stage's slice of the baked A table and BK x BN
## of B sit in one of two LDS buffers; the next live stage is read from
## global memory into registers before the MFMAs and written to the other
## buffer after them, one barrier per stage.  Wavefront (wy, wx) keeps the
## accumulators of its wm x wn 16x16 tiles; beta*C is added when C is
## stored.  Only loads and stores are guarded (columns of B past n and rows
## past k are staged as zeros); every MFMA runs on all 64 lanes.
<%
    P = plan
    BM, BN, BK, S = P.block_m, P.block_n, P.block_k, P.b_stride
    NMB, NSL, NST = P.m_blocks, P.slots, P.stages
    WM, WN, KS = P.wm, P.wn, P.kstage
    NT = P.nthreads
    NA = -(-P.a_chunks // NT)
    NB = -(-P.b_chunks // NT)
    full = P.all_live
    kpad = P.k_padded
    V = P.vec
    tab = f'{kname}_atab'
    # reordered A: stage row r of B is B's row brow[r] (the kernel's k runs
    # over A's used columns, P.k of them), row i of C is C's row crow[i]
    RO = P.rows is not None
    # compact: each m-block's B rows by its own part of the row table (-1
    # past its used columns: staged as zeros)
    CP = P.bcols is not None
    BN2 = BN // 2
    # lanes of a wavefront per staged B row, where a row spans part of one
    RPW = 1 if BN2 % 64 == 0 else 64 // BN2
    # the live-stage tables: int where the B row table is indexed by their
    # values (scalar loads, which have no 16-bit form, keep the stage and
    # the rows it reads in SGPRs: no wait for vector loads before B's)
    itype = 'int' if RO else 'short'
    # the B row table reaches past the last stage by the rows a stage's
    # last chunks would start (zeros: read, never used)
    NBROW = NST*BK + -(-NB*NT // BN2) + RPW

    def upd(x, cval):
        if beta == 0:
            return x
        if beta == 1:
            return f'{x} + {cval}'
        return f'{x} + {betalit}*{cval}'

    wyoff = f'wy*{16*WM}'
    # baked n, whole column blocks: no column of a block is past n
    whole = n is not None and n % BN == 0

    def crow(i, v):
        """The row of C of element v of m-tile i (a C row table entry,
        loaded before the stage loop, where A is reordered)."""
        if RO:
            return f'csh[{wyoff} + {16*i + 4*v} + g]'
        return f'(row0 + {16*i + 4*v})'
%>
typedef double gimmik_v4d __attribute__((vector_size(32)));

## The base prologue, asking for plan's waves per SIMD: clang-19 then keeps
## the accumulators in VGPRs across the stage loop (without it they live in
## AGPRs and are copied to VGPRs and back around the loop, twice the
## registers).
<%def name="prologue()">${capture(parent.prologue).replace(f'__launch_bounds__({nthreads})', f'__launch_bounds__({nthreads}) __attribute__((amdgpu_waves_per_eu({waves})))', 1)}</%def>

// A in fragment order, [m-block][slot][wy][k-step][m-tile][lane]: lane
// 16g + t of m-tile i feeds A[16*(m-tile) + t][${BK}*(stage) + 4*(k-step) + g]
__constant__ __attribute__((aligned(16))) const double ${tab}[${P.table.size}] = {
% for row in P.table.reshape(-1, 8):
    ${', '.join(lit(x) for x in row)},
% endfor
};
% if not full:

// per m-block: its live stages (slot -> stage) and their count
__constant__ const ${itype} ${kname}_kidx[${P.live_stages.size}] = {${', '.join(str(int(x)) for x in P.live_stages.reshape(-1))}};
__constant__ const ${itype} ${kname}_cnt[${NMB}] = {${', '.join(str(int(x)) for x in P.live_count)}};
% endif
% if RO:

% if CP:
// each m-block over its own columns: row r of m-block mb's stages of B is
// B's row brow[mb*${NSL*BK} + r] (-1 past its used columns), row i of C is
// C's row crow[i] (zeros past m)
__constant__ const int ${kname}_brow[${P.bcols.size + NBROW - NST*BK}] = {${', '.join(str(int(x)) for x in list(P.bcols.reshape(-1)) + [-1]*(NBROW - NST*BK))}};
% else:
// A reordered: row r of a stage of B is B's row brow[r], row i of C is C's
// row crow[i] (zeros past k and m)
__constant__ const int ${kname}_brow[${NBROW}] = {${', '.join(str(x) for x in list(P.cols) + [0]*(NBROW - P.k))}};
% endif
__constant__ const int ${kname}_crow[${NMB*BM}] = {${', '.join(str(x) for x in list(P.rows) + [0]*(NMB*BM - m))}};
% endif

## Read chunk it of the stage with index `st` (its slot `sl`) into registers.
<%def name="stage_load(sl, st)">\
% for it in range(NA):
<% idx = f'(tid + {it*NT})' %>\
% if (it + 1)*NT > P.a_chunks:
        pa${it} = ${idx} < ${P.a_chunks} ? *(const gimmik_v2*) (atab + ${sl}*${P.slot_size} + 2*${idx}) : gimmik_v2{0.0, 0.0};
% else:
        pa${it} = *(const gimmik_v2*) (atab + ${sl}*${P.slot_size} + 2*${idx});
% endif
% endfor
% for it in range(NB):
<% idx = f'(tid + {it*NT})' %>\
        {
% if CP:
            const int col = col0 + 2*(${idx} % ${BN // 2});
% else:
            const int r = ${idx} / ${BN // 2}, cc = 2*(${idx} % ${BN // 2});
<% kr = 'kr' if RO else 'row' %>\
            const int ${kr} = ${st}*${BK} + r, col = col0 + cc;
% endif
<%
    conds = []
    if (it + 1)*NT > P.b_chunks:
        conds.append(f'{idx} < {P.b_chunks}')
    if CP:
        conds.append('row >= 0')
    elif kpad:
        conds.append(f'{kr} < {P.k}')
    ok = ' && '.join(conds)
%>\
% if RO:
            // the wavefront's staged rows of B from the row table (lane 0's
            // row and the next ${RPW - 1}: wave-uniform, scalar loads)
            const int kr0 = ${'mb*%d + ' % (NSL*BK) if CP else ''}${st}*${BK} + (64*wave + ${it*NT}) / ${BN2};
<% rfl = '__builtin_amdgcn_readfirstlane' %>\
% if RPW == 1:
            const int row = ${rfl}(${kname}_brow[kr0]);
% else:
            const int row = ${' : '.join([f'lane < {BN2*(j + 1)} ? {rfl}({kname}_brow[kr0 + {j}])' for j in range(RPW - 1)] + [f'{rfl}({kname}_brow[kr0 + {RPW - 1}])'])};
% endif
% endif
            pb${it} = gimmik_v2{0.0, 0.0};
% if ok:
            if (${ok})
% endif
            {
                const ${dtype}* p = b + row*ldbl + col;
% if whole and V == 2:
                pb${it} = *(const gimmik_v2*) p;
% elif whole:
                pb${it}[0] = p[0];
                pb${it}[1] = p[1];
% elif V == 2:
                if (col + 1 < n)
                    pb${it} = *(const gimmik_v2*) p;
                else if (col < n)
                    pb${it}[0] = p[0];
% else:
                if (col < n)
                    pb${it}[0] = p[0];
                if (col + 1 < n)
                    pb${it}[1] = p[1];
% endif
            }
        }
% endfor
</%def>

## Write the registers of stage_load into LDS buffer buf.
<%def name="stage_store(buf)">\
% for it in range(NA):
% if (it + 1)*NT > P.a_chunks:
        if (tid + ${it*NT} < ${P.a_chunks})
% endif
        *(gimmik_v2*) &ash[${buf}][2*(tid + ${it*NT})] = pa${it};
% endfor
% for it in range(NB):
        {
            const int idx = tid + ${it*NT};
% if (it + 1)*NT > P.b_chunks:
            if (idx < ${P.b_chunks})
% endif
            *(gimmik_v2*) &bsh[${buf}][idx / ${BN // 2}][2*(idx % ${BN // 2})] = pb${it};
        }
% endfor
</%def>

## The MFMAs of one stage from LDS buffer `buf` (an expression).
<%def name="compute(buf)">\
        {
            const double* as = &ash[${buf}][wy*${KS*WM*64} + lane];
            const double* bs = &bsh[${buf}][g][wx*${16*WN} + 2*t];
% for ks in range(KS):
            {
% for i in range(WM):
                const double a${i} = as[${(ks*WM + i)*64}];
% endfor
% for j in range(WN // 2):
                const gimmik_v2 b${j} = *(const gimmik_v2*) (bs + ${4*ks*S + 32*j});
% endfor
% for i in range(WM):
% for nt in range(WN):
                acc${i}_${nt} = __builtin_amdgcn_mfma_f64_16x16x4f64(a${i}, b${nt // 2}[${nt % 2}], acc${i}_${nt}, 0, 0, 0);
% endfor
% endfor
            }
% endfor
        }
</%def>

## C = acc + beta*C for this wavefront's tiles; rows past m and columns
## past n untouched.
<%def name="epilogue()">\
% for i in range(WM):
% for v in range(4):
<% r = 16*i + 4*v %>\
    if (row0 + ${r} < ${m})
    {
        ${dtype}* cr = c + ${crow(i, v)}*ldcl;
% for j in range(WN // 2):
<%
    x0, x1 = f'acc{i}_{2*j}[{v}]', f'acc{i}_{2*j + 1}[{v}]'
%>\
        {
            const int col = ccol + ${32*j};
            ${dtype}* p = cr + col;
% if V == 2:
% if not whole:
            if (col + 1 < n)
% endif
            {
                const gimmik_v2 x = {${x0}, ${x1}};
                __builtin_nontemporal_store(${upd('x', '(*(gimmik_v2*) p)')}, (gimmik_v2*) p);
            }
% if not whole:
            else if (col < n)
                __builtin_nontemporal_store(${upd(x0, 'p[0]')}, p);
% endif
% elif whole:
            __builtin_nontemporal_store(${upd(x0, 'p[0]')}, p);
            __builtin_nontemporal_store(${upd(x1, 'p[1]')}, p + 1);
% else:
            if (col < n)
                __builtin_nontemporal_store(${upd(x0, 'p[0]')}, p);
            if (col + 1 < n)
                __builtin_nontemporal_store(${upd(x1, 'p[1]')}, p + 1);
% endif
        }
% endfor
    }
% endfor
% endfor
</%def>

${self.prologue()}\
    __shared__ __attribute__((aligned(16))) double ash[2][${P.slot_size}];
    __shared__ __attribute__((aligned(16))) double bsh[2][${BK}][${S}];
% if RO:
    __shared__ int csh[${BM}];
% endif
    const int lane = threadIdx.x, g = lane >> 4, t = lane & 15;
    const int wave = __builtin_amdgcn_readfirstlane(threadIdx.y);
    const int wy = wave / ${P.nwaves}, wx = wave % ${P.nwaves};
    const int tid = 64*wave + lane;
${self.tiles_open()}\
    const int mb = ${bid} % ${NMB};
    const int col0 = (${bid} / ${NMB})*${BN};
    const double* __restrict__ atab = ${tab} + mb*${NSL*P.slot_size};
% if full:
    const int nst = ${NST};
% else:
    const int nst = ${kname}_cnt[mb];
    const ${itype}* __restrict__ kidx = ${kname}_kidx + mb*${NSL};
% endif
    const gimmik_v4d zero4 = {0.0, 0.0, 0.0, 0.0};
% for i in range(WM):
    gimmik_v4d ${', '.join(f'acc{i}_{nt} = zero4' for nt in range(WN))};
% endfor
    gimmik_v2 ${', '.join([f'pa{x}' for x in range(NA)] + [f'pb{x}' for x in range(NB)])};

    // live stage 0 into LDS buffer 0
% if full:
${stage_load('0', '0')}\
% else:
    {
        const int st = kidx[0];
${stage_load('0', 'st')}\
    }
% endif
% if RO:
    // the m-block's rows of C from the row table, loaded with stage 0 and
    // kept in LDS for the epilogue
    const int crv = tid < ${BM} ? ${kname}_crow[mb*${BM} + tid] : 0;
% endif
${stage_store(0)}\
% if RO:
    if (tid < ${BM})
        csh[tid] = crv;
% endif
    __syncthreads();

    // every live stage but the last: the next one's loads, this one's
    // MFMAs, the next one into the other buffer (no branch between a
    // load and its LDS write: the compiler waits for the loads once a
    // stage)
#pragma unroll 1
    for (int s = 0; s + 1 < nst; ++s)
    {
        const int buf = s & 1;
        {
% if full:
            const int st = s + 1;
% else:
            const int st = kidx[s + 1];
% endif
${stage_load('(s + 1)', 'st')}\
        }
${compute('buf')}\
${stage_store('buf ^ 1')}\
        __syncthreads();
    }
    // the last live stage (none in an m-block without one)
% if not full:
    if (nst > 0)
% endif
    {
        const int buf = (nst - 1) & 1;
${compute('buf')}\
    }

    // this lane's rows of C: row0 + 16i + 4v for element v of acc<i>_<nt>;
    // its columns ccol + 32j (n-tile 2j) and ccol + 32j + 1 (n-tile 2j + 1)
    const int row0 = mb*${BM} + wy*${16*WM} + g;
    const int ccol = col0 + wx*${16*WN} + 2*t;
${epilogue()}\
${self.tiles_close()}\
}
