<%inherit file="base.mako"/>
<%namespace name="mma" file="mma-lib.mako"/>
## mma-gemm: f64 on the FP64 tensor cores with 2-D block tiling.  Block
## blockIdx.x computes the BM x BN tile of C of m-block blockIdx.x % nmb and
## column block blockIdx.x / nmb.  The k loop runs over plan.nstages stages
## of BK rows: the stage's slice of the baked A table (contiguous per
## m-block and stage) and BK x BN of B go to shared memory with cp.async,
## plan.nbuf stages deep, one __syncthreads per stage.  Where A has zero
## BM x BK slabs an m-block runs only its live stages (kidx, cnt; with
## params skip).  Warp (wy, wx) owns wm m-tiles and wn n-tiles (8
## columns; 16 for the transposed shapes, whose MMAs take B as their A
## operand), their columns placed by GemmPlan.column so that B's fragments
## are 16-byte vector reads from a B stage whose rows have their 16-byte
## chunks permuted (gemm_b_offset, gemm_b_read); C is read and written in
## whole sectors by lane pairs (gemm_c_pairs; transposed: whole 128-byte
## lines by 8 lanes, no exchange); accumulators stay in
## registers; with params preload_c they start from beta*C, loaded before the k
## loop, else beta*C is added at the end.  With params
## tiles T a block computes T column tiles in turn, its stage pipeline
## running on from one tile into the next (the next tile's first stages
## load while the last ones compute and the tile's C is stored).
## Fragment layouts and the table order: gimmik/fragments/mma.py (gemm_coords,
## GemmPlan).
<%
    P = plan
    MT, KT, NA, NB, NC, V = P.mma_m, P.mma_k, P.a_per_lane, P.b_per_lane, P.c_per_lane, P.a_vec
    BM, BN, BK = P.BM, P.BN, P.BK
    HW = P.wn // 2
    TR = P.transposed
    SC = '' if beta == 1 else f'{betalit}*'    # beta*, as C's reads scale
    CSENT, CST = P.c_pairs() if not TR else (None, None)

    def trow(mt, h):
        # transposed shapes: the row of C of a lane's values c_h, c_{2+h}
        # of m-tile mt
        return f'mb*{BM} + (wy*{P.wm} + {mt})*{MT} + 2*t4 + {h}'

    def tcol(nt):
        # transposed shapes: C's column of a lane's c_h of n-tile nt
        return f'col0 + (wx*{P.wn} + {nt})*16 + 2*g'

    def cacc(mt, h, lc):
        # the accumulator of a lane's local column lc of C in row half h
        # of m-tile mt (GemmPlan.c_local)
        nt, e = P.c_local(lc)
        return f'acc[{mt}][{nt}][{2*h + e}]'
    NBUF, NST = P.nbuf, P.nstages
    achunks = BM*BK//2
    bchunks = BK*BN//2
    shape = P.shape
    # reordered plans: B's rows gathered and C's rows scattered by tables
    RO = P.rows is not None
    # compact plans: each m-block's B rows by its own table, -1 past them
    CP = P.bcols is not None
    KK = len(P.cols) if RO and not CP else k
    kpad = NST*BK > KK

    def crow(row):
        # the offset in C of the kernel's row `row`
        return f'(long){kname}_crow[{row}]*ldcl' if RO else f'{row}*ldcl'
    full = P.full
    NSL = P.nslots
    T = P.tiles
    late_issue = P.late_issue
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
% if RO:
// the row of B of each k index of the stages (compact: of each m-block's
// slots, -1 past its used columns), the row of C of each row of the
// m-blocks (0 past k and m)
% if CP:
static __constant__ int ${kname}_brow[${P.bcols.size}] = {${', '.join(str(int(x)) for x in P.bcols.reshape(-1))}};
% else:
static __constant__ int ${kname}_brow[${NST*BK}] = {${', '.join(str(x) for x in list(P.cols) + [0]*(NST*BK - KK))}};
% endif
static __device__ const int ${kname}_crow[${P.nmb*BM}] = {${', '.join(str(x) for x in list(P.rows) + [0]*(P.nmb*BM - m))}};
% endif

% if TR:
${mma.mma_fn(P.instr, 16, KT, NB, NA, NC)}
% else:
${mma.mma_fn(shape, MT, KT, NA, NB, NC)}
% endif
${mma.cp_async()}
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
            {
% if RO:
                const double* bst = b + ${cbase};
% else:
                const double* bst = b + ${kst}*${BK}*ldbl + ${cbase};
% endif
% for it in range(-(-bchunks // nthreads)):
% if (it + 1)*nthreads > bchunks:
                if (tid + ${it*nthreads} < ${bchunks})
% endif
                {
                    const int col = ${cbase} + bc${it};
% if CP:
                    const int brw = ${kname}_brow[mb*${NSL*BK} + ${kst}*${BK} + br${it}];
                    const int nb = (brw >= 0 && col < n) ? (col + 1 < n ? 16 : 8) : 0;
% elif kpad:
                    const int nb = (${kst}*${BK} + br${it} < ${KK} && col < n) ? (col + 1 < n ? 16 : 8) : 0;
% else:
                    const int nb = col < n ? (col + 1 < n ? 16 : 8) : 0;
% endif
% if CP:
                    ${kname}_cp16(&bsh[${buf}][bso${it}], nb ? bst + brw*ldbl + bc${it} : b, nb);
% elif RO:
                    ${kname}_cp16(&bsh[${buf}][bso${it}], nb ? bst + ${kname}_brow[${kst}*${BK} + br${it}]*ldbl + bc${it} : b, nb);
% else:
                    ${kname}_cp16(&bsh[${buf}][bso${it}], nb ? bst + boff${it} : b, nb);
% endif
                }
% endfor
            }
</%def>
<%def name="init_acc()">\
% if beta == 0 or not P.preload_c:
#pragma unroll
    for (int i = 0; i < ${P.wm}; ++i)
#pragma unroll
        for (int j = 0; j < ${P.wn}; ++j)
#pragma unroll
            for (int q = 0; q < ${NC}; ++q)
                acc[i][j][q] = 0.0;
% elif TR:
## transposed: a lane's values of row 2t + h of C are columns 2g, 2g + 1
## of each n-tile (c_h, c_{2+h}); 8 lanes read a row's 128-byte line.
## Where the tile's columns are all inside n the reads are predicated on
## the row alone (no branches: every read is in flight at once).
    if (col0 + ${BN} <= n)
    {
% for mt in range(P.wm):
% for h in (0, 1):
        {
            const int row = ${trow(mt, h)};
            const double* cr = c + ${crow('row')} + ${tcol(0)};
% for nt in range(P.wn):
            double2 cv${nt} = {0.0, 0.0};
            if (row < ${m})
                cv${nt} = __ldcs((const double2*)(cr + ${16*nt}));
% endfor
% for nt in range(P.wn):
            acc[${mt}][${nt}][${h}] = ${SC}cv${nt}.x;
            acc[${mt}][${nt}][${2 + h}] = ${SC}cv${nt}.y;
% endfor
        }
% endfor
% endfor
    }
    else
    {
% for mt in range(P.wm):
% for h in (0, 1):
        {
            const int row = ${trow(mt, h)};
% for nt in range(P.wn):
${mma.load_pair(tcol(nt), f'acc[{mt}][{nt}][{h}]', f'acc[{mt}][{nt}][{2 + h}]', ' '*12, rowoff=crow('row'))}\
% endfor
        }
% endfor
% endfor
    }
% else:
## beta*C read in whole sectors by lane pairs (gemm_c_pairs), the
## partner's columns then swapped into place (per-lane half-sector reads
## were slower: bench/results/cuda-h100-gemm-beta-direct.csv).
% for mt in range(P.wm):
% for h in range(NC // 2):
    {
        const int row = mb*${BM} + (wy*${P.wm} + ${mt})*${MT} + ${8*h} + g;
        double y[${2*P.wn}];
% for s in range(len(CST)):
${mma.load_pair(f'col0 + cpair0 + {4*s}', f'y[{2*s}]', f'y[{2*s + 1}]', ' '*8, rowoff=crow('row'))}\
% endfor
<%
    # y[2s + d] holds lane o's column of store s: its own local column i + d
    # (mine) or the partner's sent[1 - o][i + d]; the partner's values go
    # back through the swap
    def acc(lc):
        return cacc(mt, h, lc)
    own = [{}, {}]      # lane o: local column -> y index
    out = [{}, {}]      # lane o: index into the partner's x -> y index
    for s, lanes in enumerate(CST):
        for o, (mine, i) in enumerate(lanes):
            for d in (0, 1):
                (own[o] if mine else out[o])[i + d] = 2*s + d
%>\
% for j in range(P.wn):
        {
            // the partner sends my local column sent[o][j]
            const double x = __shfl_xor_sync(0xffffffffu, odd ? y[${out[1][j]}] : y[${out[0][j]}], 1);
            if (odd)
                ${acc(CSENT[1][j])} = x;
            else
                ${acc(CSENT[0][j])} = x;
        }
% endfor
% for lc in range(2*P.wn):
% if lc in own[0] and lc in own[1]:
        ${acc(lc)} = odd ? y[${own[1][lc]}] : y[${own[0][lc]}];
% elif lc in own[0]:
        if (!odd)
            ${acc(lc)} = y[${own[0][lc]}];
% elif lc in own[1]:
        if (odd)
            ${acc(lc)} = y[${own[1][lc]}];
% endif
% endfor
    }
% endfor
% endfor
% endif

</%def>
## C's rows stored in whole sectors by lane pairs: the partner's columns
## swapped in first (gemm_c_pairs).
<%def name="epilogue()">\
% if TR:
## transposed: 8 lanes write a row's 128-byte line per n-tile; where the
## tile's columns are all inside n, without column checks
<% addc = not P.preload_c and beta != 0 %>\
    if (col0 + ${BN} <= n)
    {
% for mt in range(P.wm):
% for h in (0, 1):
        {
            const int row = ${trow(mt, h)};
            double* cr = c + ${crow('row')} + ${tcol(0)};
            if (row < ${m})
            {
% if addc:
% for nt in range(P.wn):
                const double2 cv${nt} = __ldcs((const double2*)(cr + ${16*nt}));
% endfor
% endif
% for nt in range(P.wn):
% if addc:
                ${st_fn}((double2*)(cr + ${16*nt}), double2{acc[${mt}][${nt}][${h}] + ${SC}cv${nt}.x, acc[${mt}][${nt}][${2 + h}] + ${SC}cv${nt}.y});
% else:
                ${st_fn}((double2*)(cr + ${16*nt}), double2{acc[${mt}][${nt}][${h}], acc[${mt}][${nt}][${2 + h}]});
% endif
% endfor
            }
        }
% endfor
% endfor
    }
    else
    {
% for mt in range(P.wm):
% for h in (0, 1):
        {
            const int row = ${trow(mt, h)};
            if (row < ${m})
            {
% for nt in range(P.wn):
${mma.store_pair(tcol(nt), f'acc[{mt}][{nt}][{h}]', f'acc[{mt}][{nt}][{2 + h}]', not P.preload_c, ' '*16, rowoff=crow('row'))}\
% endfor
            }
        }
% endfor
% endfor
    }
% else:
% for mt in range(P.wm):
% for h in range(NC // 2):
<%
    def acc(lc):
        return cacc(mt, h, lc)
    def val(o, d, s):
        mine, i = CST[s][o]
        return acc(i + d) if mine else f'x[{i + d}]'
%>\
    {
        const int row = mb*${BM} + (wy*${P.wm} + ${mt})*${MT} + ${8*h} + g;
        double x[${P.wn}];
% for j in range(P.wn):
        x[${j}] = __shfl_xor_sync(0xffffffffu, odd ? ${acc(CSENT[1][j])} : ${acc(CSENT[0][j])}, 1);
% endfor
        if (row < ${m})
        {
% for s in range(len(CST)):
${mma.store_pair(f'col0 + cpair0 + {4*s}', f'(odd ? {val(1, 0, s)} : {val(0, 0, s)})', f'(odd ? {val(1, 1, s)} : {val(0, 1, s)})', not P.preload_c, ' '*12, rowoff=crow('row'))}\
% endfor
        }
    }
% endfor
% endfor
% endif
</%def>
## Load k-step ks's A and B fragments of the stage in buffer `buf` into
## fragment set f (fa<f>, fb<f>).
<%def name="frags(ks, f, buf)">\
        {
            const double* as = &ash[${buf}][${P.a_offset(0, 0, 0, 0, 0)} + wy*${P.a_offset(0, 1, 0, 0, 0)} + lane*${V}];
            const double* bs = &bsh[${buf}][0];
% for mt in range(P.wm):
% for j in range(NA // V):
<% off = P.a_offset(0, 0, ks, mt, j) %>\
% if V == 2:
            {
                const double2 x = *(const double2*)(as + ${off});
                fa${f}[${mt}][${2*j}] = x.x;
                fa${f}[${mt}][${2*j + 1}] = x.y;
            }
% else:
            fa${f}[${mt}][${j}] = as[${off}];
% endif
% endfor
% endfor
% if TR:
## transposed: B's columns g, g + 8 of n-tile nt, rows t + 4q
% for nt in range(P.wn):
% for q in range(KT // 4):
            {
                const double2 x = *(const double2*)(bs + btv${nt} + ${(ks*KT + 4*q)*BN});
                fb${f}[${nt}][${2*q}] = x.x;
                fb${f}[${nt}][${2*q + 1}] = x.y;
            }
% endfor
% endfor
% else:
% for i in range(NB):
% for p in range(HW):
            {
                const double2 x = *(const double2*)(bs + bv${p} + ${(ks*KT + 4*i)*BN});
                fb${f}[${2*p}][${i}] = x.x;
                fb${f}[${2*p + 1}][${i}] = x.y;
            }
% endfor
% endfor
% endif
        }
</%def>
<%def name="mmas(f)">\
% for mt in range(P.wm):
% for nt in range(P.wn):
% if TR:
        ${kname}_mma(acc[${mt}][${nt}], fb${f}[${nt}], fa${f}[${mt}]);
% else:
        ${kname}_mma(acc[${mt}][${nt}], fa${f}[${mt}], fb${f}[${nt}]);
% endif
% endfor
% endfor
</%def>
## Issue the loads of stage `sn` into buffer wb (with tiles the stages run
## on into the next tile: sn counts stages over all the block's tiles) and
## close their cp.async group.
<%def name="issue(sn)">\
        {
            const int sn = ${sn};
            if (sn < ${'nst' if T == 1 else 'nit'})
            {
% if T > 1:
                const int tl = sn / nst, sl = sn - tl*nst;
<% slot, cbase = 'sl', f'(cb0 + tl*{BN})' %>\
% else:
<% slot, cbase = 'sn', 'col0' %>\
% endif
% if full:
${stage_load(slot, slot, 'wb', cbase)}\
% else:
                const int kst = kidx[${slot}];
${stage_load(slot, 'kst', 'wb', cbase)}\
% endif
            }
            GIMMIK_CP_ASYNC("commit_group");
            wb = wb == ${NBUF - 1} ? 0 : wb + 1;
        }
</%def>
## The k loop over a column tile's live stages.  Stage it's fragments of
## k-step ks + 1 load while the mmas of ks issue; before the last k-step's
## mmas the block waits for stage it + 1 (one barrier per stage) and loads
## its first fragments, so that no warp waits for shared memory after the
## barrier.  The loads of stage it + NBUF - 1 go to buffer wb, read last in
## stage it - 1: issued after the mmas of k-step 0 where a stage has more
## than one k-step and NBUF > 2 (their address arithmetic then issues
## while the tensor cores work), else right after the barrier that ended
## stage it - 1 (stage it + NBUF - 1 has a whole stage to land).
## Fragments of k-step ks live in set ks % 2; stage it + 1's first ones
## arrive in set kstage % 2, moved to set 0 where kstage is odd.
<%def name="kloop()">\
<% it = 's' if T == 1 else 'tile*nst + s' %>\
#pragma unroll 1
    for (int s = 0; s < nst; ++s)
    {
% for ks in range(P.kstage):
% if ks < P.kstage - 1:
${frags(ks + 1, (ks + 1) % 2, 'rb')}\
% else:
        GIMMIK_CP_ASYNC("wait_group ${NBUF - 2}");
        __syncthreads();
        rb = rb == ${NBUF - 1} ? 0 : rb + 1;
${frags(0, (ks + 1) % 2, 'rb')}\
% if not late_issue:
${issue(f'{it} + {NBUF}')}\
% endif
% endif
${mmas(ks % 2)}\
% if ks == 0 and late_issue:
${issue(f'{it} + {NBUF - 1}')}\
% endif
% endfor
% if P.kstage % 2:
#pragma unroll
        for (int i = 0; i < ${P.wm*NA}; ++i)
            fa0[i / ${NA}][i % ${NA}] = fa1[i / ${NA}][i % ${NA}];
#pragma unroll
        for (int i = 0; i < ${P.wn*NB}; ++i)
            fb0[i / ${NB}][i % ${NB}] = fb1[i / ${NB}][i % ${NB}];
% endif
    }

${epilogue()}\
</%def>
${self.prologue()}\
    __shared__ __align__(16) double ash[${NBUF}][${BM*BK}];
    __shared__ __align__(16) double bsh[${NBUF}][${BK*BN}];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t4 = lane % 4;
    const int wy = warp / ${P.nwarps}, wx = warp % ${P.nwarps};
% if TR:
    // this lane's B vector reads of rows 0-3 of a stage: columns g, g + 8
    // of n-tile nt, at block columns 2g, 2g + 1 of the tile (GemmPlan.column)
% for nt in range(P.wn):
    const int btv${nt} = t4*${BN} + 2*((wx*${8*P.wn} + ${8*nt} + g) ^ (2*t4));
% endfor
% else:
    // this lane's first column of C's stores in the block (gemm_c_pairs)
    // and its B vector reads of rows 0-3 of a stage (gemm_b_read)
    const int odd = t4 & 1;
    const int cpair0 = wx*${8*P.wn} + (t4 >> 1)*${4*P.wn} + 2*odd;
% for p in range(HW):
    const int bv${p} = t4*${BN} + 2*((wx*${4*P.wn} + g*${HW} + (${'(g & 1) ^ ' if P.wn % 4 == 0 else ''}${p})) ^ (2*t4));
% endfor
% endif
    // the B chunks this thread copies: row br, columns bc and bc + 1 of a
    // stage, to offset bso of its buffer (gemm_b_offset)
## (boff: the chunk's offset in B, where B's rows are not gathered)
% for it in range(-(-bchunks // nthreads)):
<% dr = it*nthreads // (BN // 2) %>\
% if it and nthreads % (BN // 2) == 0 and dr % 4 == 0:
## chunk it is chunk 0's dr rows down: the same column and chunk permutation
    const int br${it} = br0 + ${dr}, bc${it} = bc0;
    const int bso${it} = bso0 + ${dr*BN};
% if not RO:
    const long boff${it} = boff0 + ${dr}*ldbl;
% endif
% else:
    const int br${it} = (tid + ${it*nthreads}) / ${BN // 2}, bc${it} = 2*((tid + ${it*nthreads}) % ${BN // 2});
    const int bso${it} = br${it}*${BN} + 2*((bc${it} / 2) ^ (2*(br${it} % 4)));
% if not RO:
    const long boff${it} = br${it}*ldbl + bc${it};
% endif
% endif
% endfor
${self.tiles_open()}\
    const int mb = ${bid} % ${P.nmb};
% if T == 1:
    const int col0 = (${bid} / ${P.nmb})*${BN};
% else:
    const int cb0 = (${bid} / ${P.nmb})*${T*BN};
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
    GIMMIK_CP_ASYNC("commit_group");
% endfor
    // buffers: rb holds the stage computed, wb takes the next one loaded
    int rb = 0, wb = ${NBUF - 1};
    double fa0[${P.wm}][${NA}], fb0[${P.wn}][${NB}];
    double fa1[${P.wm}][${NA}], fb1[${P.wn}][${NB}];
    GIMMIK_CP_ASYNC("wait_group ${NBUF - 2}");
    __syncthreads();
${frags(0, 0, 'rb')}\
% if not late_issue:
${issue(NBUF - 1)}\
% endif

% if T == 1:
${kloop()}\
% else:
#pragma unroll 1
    for (int tile = 0; tile < ${T}; ++tile)
    {
    const int col0 = cb0 + tile*${BN};
${init_acc()}
${kloop()}\
    }
% endif
${self.tiles_close()}\
}
