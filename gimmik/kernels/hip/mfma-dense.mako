<%inherit file="base.mako"/>
<%! from gimmik.fragments import mfma %>
## mfma-dense: A, baked in the fragment order of the f64 16x16x4 MFMA
## (plan.bake, see gimmik/fragments/mfma.py), is multiplied on the matrix
## cores.
##
## Each 64-lane wavefront covers the block's 64 columns as four 16-wide
## N-tiles: lane L = 16g + t handles columns col, col+1 (N-tiles 0, 1) and
## col+32, col+33 (N-tiles 2, 3), col = 64*block + 2t; that is, column t of
## N-tile nt is 64*block + 32*(nt/2) + 2t + nt%2.  So every MFMA operand and
## result of a lane is two pairs of columns, and the 16 lanes of a row read
## or write 256 contiguous bytes per access (global memory and LDS, free of
## bank conflicts).  Wavefront y (one per blockDim.y) owns the m-tiles
## y*per .. y*per + per-1 and keeps only their accumulators acc<i>_<nt>
## (i: its i-th m-tile, nt: N-tile) live.  All wavefronts run the same
## code: the fragment table has one row per wavefront (plan.frags), zero
## where a wavefront's tile is all-zero, and each wavefront's share of the
## LDS staging is chosen by its index (plan.stage).
##
## msplit = 1 (direct): B goes from global memory straight into registers,
## one k-tile at a time, skipping all-zero tiles of A.  msplit > 1: the block
## stages the rows of B that A uses in LDS, chunk by chunk (plan.chunks, at
## most 8 k-tiles), padding rows zero-filled, and every wavefront
## multiplies its m-tiles by every chunk.  The code is plan.steps in order
## (gimmik.fragments.mfma.mfma_steps: what is loaded ahead of what).
## beta != 0: C's old values are loaded in runs of rows, a run ahead.
##
## Columns: a block whose 64 columns are all inside n (full) uses plain
## loads and stores; the block holding column n - 1 loads every column
## past n from column n - 1 (two-column loads: the pair holding it; MFMA
## columns are independent, and those results are never stored) and
## guards its stores.  Where a block issues few loads, that copy serves
## every block (mfma.code_paths).  Every MFMA is executed
## by all 64 lanes in wave-uniform control flow (the wavefront index goes
## through readfirstlane).
<%
    bake = plan.bake
    tl = bake.tiling
    ms = plan.msplit
    nacc = plan.ntiles_per_wave
    VB = 'gimmik_v2' if vec == 2 else dtype
    afrag = f'{kname}_afrag'
    rowsof = {kt: ts for items in plan.work for kt, ts in items}
    # the kinds of block a copy of the steps is made for (True: full)
    paths = mfma.code_paths(n, plan, beta)
    allfull = paths == (True,)
    # the last row of C a lane of any wavefront may reach: rows past m are
    # loaded from row m - 1 and not stored
    top = 16*plan.per*(ms - 1) + 3

    def crow(i, v):
        r = 16*i + 4*v
        return r if top + r < m else f'({r} < mleft ? {r} : mleft - 1)'


    # the steps from the last load on (MFMAs, LDS, C's final values) are
    # one code for full blocks and the block holding column n - 1: their
    # waits are one wait, not one a copy
    head, tail = mfma.split_steps(plan.steps, beta)
    decls = []
    for st in plan.steps:
        if st[0] == 'a':
            decls += [f'double a{s}' for s in st[2]]
        elif st[0] in 'br':
            decls.append(f'gimmik_v4d b{st[1]}')
        elif st[0] == 's':
            decls += [f'{VB} s{st[1]}_{s}' for s in range(len(plan.stage[st[1]]))]
        elif st[0] == 'l' and beta != 0:
            decls += [f'gimmik_v4d c{i}_{v}' for i, v in plan.crun[st[1]]]

    def scale(x):
        return x if beta == 1 else f'{betalit}*{x}'
%>
typedef double gimmik_v4d __attribute__((vector_size(32)));

// x computed at this point, where the target has inline asm
#ifndef GIMMIK_KEEP
#if defined(__AMDGCN__)
#define GIMMIK_KEEP(x) __asm__ volatile("" :: "v"(x))
#else
#define GIMMIK_KEEP(x) ((void)(x))
#endif
#endif

// A in fragment order: ${afrag}[y][s][16g + t] is what lane 16g + t of
// wavefront y feeds to MFMA slot s: A[16*mt + t][B row g of the k-tile] for
// its m-tile mt of the slot.
__constant__ const double ${afrag}[${ms}][${plan.nslots}][64] = {
% for y in range(ms):
  { // wavefront ${y}
% for q, items in enumerate(plan.work):
% for kt, ts in items:
% for i, slot in ts:
    {   // slot ${slot}: m-tile ${plan.per*y + i}, k-tile ${kt}
% for g in range(4):
        ${', '.join(lit(v) for v in plan.frags[y, slot, 16*g:16*g + 16])},
% endfor
    },
% endfor
% endfor
% endfor
  },
% endfor
};

// p[0], p[1], p[32], p[33]: one lane's columns of N-tiles 0..3 in a row
static __device__ inline gimmik_v4d
${kname}_ld4(const ${dtype}* __restrict__ p)
{
% if vec == 2:
    const gimmik_v2 lo = *(const gimmik_v2*) p;
    const gimmik_v2 hi = *(const gimmik_v2*) (p + 32);
    gimmik_v4d v = {lo[0], lo[1], hi[0], hi[1]};
% else:
    gimmik_v4d v = {p[0], p[1], p[32], p[33]};
% endif
    return v;
}

% if not allfull and vec == 2:
// The same in the block holding column n - 1, p[e]: each pair from
// p[min(j, e & ~1)], so pairs from n on repeat the pair holding column
// n - 1 (p is even, and a pair starting before n is inside the row: with
// n odd the even row stride leaves column n in its padding)
static __device__ inline gimmik_v4d
${kname}_ld4r(const ${dtype}* __restrict__ p, int e)
{
    const int e2 = e & ~1;
    const gimmik_v2 lo = *(const gimmik_v2*) (p + (0 < e2 ? 0 : e2));
    const gimmik_v2 hi = *(const gimmik_v2*) (p + (32 < e2 ? 32 : e2));
    gimmik_v4d v = {lo[0], lo[1], hi[0], hi[1]};
    return v;
}

% elif not allfull:
// The same in the block holding column n - 1, p[e]: p[min(j, e)], so
// columns from n on repeat column n - 1
static __device__ inline gimmik_v4d
${kname}_ld4r(const ${dtype}* __restrict__ p, int e)
{
    gimmik_v4d v = {p[0 < e ? 0 : e], p[1 < e ? 1 : e],
                    p[32 < e ? 32 : e], p[33 < e ? 33 : e]};
    return v;
}

% endif
// p[0], p[1], p[32], p[33] = x0..x3, non-temporally
static __device__ inline void
${kname}_st4(${dtype}* __restrict__ p,
${' '*len(kname)}     double x0, double x1, double x2, double x3)
{
% if vec == 2:
    const gimmik_v2 lo = {x0, x1}, hi = {x2, x3};
    __builtin_nontemporal_store(lo, (gimmik_v2*) p);
    __builtin_nontemporal_store(hi, (gimmik_v2*) (p + 32));
% else:
    __builtin_nontemporal_store(x0, p);
    __builtin_nontemporal_store(x1, p + 1);
    __builtin_nontemporal_store(x2, p + 32);
    __builtin_nontemporal_store(x3, p + 33);
% endif
}

% if not allfull:
// The same for the columns before n (nleft: columns left from p[0])
static __device__ inline void
${kname}_st4r(${dtype}* __restrict__ p, int nleft,
${' '*len(kname)}      double x0, double x1, double x2, double x3)
{
    if (nleft > 0) __builtin_nontemporal_store(x0, p);
    if (nleft > 1) __builtin_nontemporal_store(x1, p + 1);
    if (nleft > 32) __builtin_nontemporal_store(x2, p + 32);
    if (nleft > 33) __builtin_nontemporal_store(x3, p + 33);
}

% endif
% if plan.lds:
// One lane's columns of a B row staged in LDS: p[0], p[1], p[32], p[33]
static __device__ inline gimmik_v4d
${kname}_lds4(const double* p)
{
    const gimmik_v2 lo = *(const gimmik_v2*) p;
    const gimmik_v2 hi = *(const gimmik_v2*) (p + 32);
    gimmik_v4d v = {lo[0], lo[1], hi[0], hi[1]};
    return v;
}

% if vec == 2 and not allfull:
// p[0..1] for staging where column n - 1 is p[e]: the pair at
// p[min(0, e & ~1)] (as ld4r)
static __device__ inline gimmik_v2
${kname}_ld2r(const ${dtype}* __restrict__ p, int e)
{
    const int e2 = e & ~1;
    return *(const gimmik_v2*) (p + (0 < e2 ? 0 : e2));
}

% endif
% endif
## ('l', r): C's old values of run r (rows past m read row m - 1).
<%def name="load_c(r, full)">\
% for i, v in plan.crun[r]:
<%
    p = f'cw + {crow(i, v)}*ldcl'
%>\
% if full:
    c${i}_${v} = ${kname}_ld4(${p});
% else:
    c${i}_${v} = ${kname}_ld4r(${p}, nleft - 1);
${self.sched_fence()}\
% endif
% endfor
</%def>

## ('b', kt): direct path, B's rows of k-tile kt for this lane (row g of the
## k-tile; lanes of padding rows read the last row, and take zeros at the
## MFMAs, so that nothing waits for the loads before).
<%def name="load_b(kt, full)">\
<%
    rows = [r for r in tl.ktile_rows(kt) if r >= 0]
    if len(rows) == 4 and rows == list(range(rows[0], rows[0] + 4)):
        p = f'bg + {rows[0]}*ldbl'
    else:
        p = f'bc + {mfma.index_expr(rows, "g", 3)}*ldbl'
%>\
% if full:
    b${kt} = ${kname}_ld4(${p});
% else:
    b${kt} = ${kname}_ld4r(${p}, nleft - 1);
% endif
</%def>

## ('a', kt, slots): those fragments of k-tile kt.
<%def name="load_a(slots)">\
% for s in slots:
    a${s} = afrag[${64*s}];
% endfor
</%def>

## ('s', q): LDS path, this wavefront's staging slots of chunk q: slot s
## is load ix/vec + s*msplit of the chunk (buffer row ix + vec*s*msplit),
## rows of B looked up by ix (padding rows, and the loads past the chunk of
## the wavefronts with none in its last slot: the last row of B it uses).
<%def name="load_stage(q, full)">\
<%
    allrows = [r for sl in plan.stage[q] for _, rs in sl for r in rs]
    valid = [r for r in allrows if r >= 0]
%>\
% for s, loads in enumerate(plan.stage[q]):
<%
    p = f'b + {mfma.index_expr(valid, "ix", vec*ms - 1, vec*s*ms)}*ldbl + scol'
%>\
% if full and vec == 2:
    s${q}_${s} = *(const gimmik_v2*) (${p});
% elif full:
    s${q}_${s} = *(${p});
% elif vec == 2:
    s${q}_${s} = ${kname}_ld2r(${p}, se);
% else:
    s${q}_${s} = (${p})[0 < se ? 0 : se];
% endif
% endfor
</%def>

## ('w', q, buf): ... written to LDS buffer buf, padding rows as zeros (a
## wavefront without a load in the last slot skips it: its value is kept
## live up to the branch, so that the load stays where it is).
<%def name="store_stage(q, buf)">\
<%
    nvalid = sum(r >= 0 for sl in plan.stage[q] for _, rs in sl for r in rs)
%>\
% for s, loads in enumerate(plan.stage[q]):
<%
    j0 = vec*s*ms
    dst = f'bsh[{buf}][ix + {j0}][sx]'
    dst = f'*(gimmik_v2*) &{dst}' if vec == 2 else dst
    val = f's{q}_{s}'
    if j0 + vec*len(loads) > nvalid:
        val = f'ix < {nvalid - j0} ? {val} : {VB}{{}}'
%>\
% if len(loads) < ms:
    GIMMIK_KEEP(s${q}_${s});
    if (wave < ${len(loads)})
        ${dst} = ${val};
% else:
    ${dst} = ${val};
% endif
% endfor
</%def>

## ('r', kt, buf): LDS path, k-tile kt's B from buffer buf.
<%def name="read_b(kt, buf)">\
    b${kt} = ${kname}_lds4(bl${buf} + ${256*(kt - plan.chunks[plan.chunk_of(kt)][0])});
</%def>

## ('m', kt): the MFMAs of k-tile kt, four (one per N-tile) per slot.
<%def name="mfmas(kt)">\
<%
    nrows = sum(r >= 0 for r in tl.ktile_rows(kt))
%>\
    // k-tile ${kt}: B rows ${', '.join(str(r) for r in tl.ktile_rows(kt) if r >= 0)}
% if not plan.lds and nrows < 4:
    b${kt} = g < ${nrows} ? b${kt} : zero4;
% endif
% for i, s in rowsof[kt]:
% for nt in range(4):
    acc${i}_${nt} = __builtin_amdgcn_mfma_f64_16x16x4f64(a${s}, b${kt}[${nt}], acc${i}_${nt}, 0, 0, 0);
% endfor
% endfor
${self.sched_fence()}\
</%def>

## ('f', r): C's final values of run r (rows past m skipped), computed
## before any branch that skips a row or (block at column n - 1) a column:
## its accumulators and old values are kept out of the branch (else the
## compiler copies whole accumulators into it and draws the loads of the
## old values into it, each then waited for alone).
<%def name="finish(r, full)">\
% for i, v in plan.crun[r]:
<%
    row = 16*i + 4*v
    guard = f'if ({row} < mleft) ' if top + row >= m else ''
    xs = [f'acc{i}_{nt}[{v}]' if beta == 0 else
          f'acc{i}_{nt}[{v}] + {scale(f"c{i}_{v}[{nt}]")}' for nt in range(4)]
%>\
% if guard or not full:
    const double ${', '.join(f'y{i}_{v}_{nt} = {x}' for nt, x in enumerate(xs))};
<%
    xs = [f'y{i}_{v}_{nt}' for nt in range(4)]
%>\
% for x in xs:
    GIMMIK_KEEP(${x});
% endfor
% endif
% if full:
    ${guard}${kname}_st4(cw + ${row}*ldcl, ${', '.join(xs)});
% else:
    ${guard}${kname}_st4r(cw + ${row}*ldcl, nleft, ${', '.join(xs)});
% endif
${self.sched_fence()}\
% endfor
</%def>

## body(True) in a full block, body(False) in the block holding column
## n - 1.
<%def name="by_block(body)">\
    if (full)
    {
${body(True)}\
    }
    else
    {
${body(False)}\
    }
</%def>

## The kernel's steps for a full block (full True) or the block holding
## column n - 1 (False); None: steps without loads, the same for both (C's
## final values chosen by block).
<%def name="run_steps(full, steps)">\
% for st in steps:
% if st[0] == 'l' and beta != 0:
${load_c(st[1], full)}\
${self.sched_fence()}\
% elif st[0] == 'f':
% if st[1] == 0:

    // C = A*B${'' if beta == 0 else ' + beta*C'}
% endif
% if full is None:
${by_block(lambda f: capture(finish, st[1], f))}\
% else:
${finish(st[1], full)}\
% endif
% elif st[0] == 'a':
${load_a(st[2])}\
${self.sched_fence()}\
% elif st[0] == 'b':
${load_b(st[1], full)}\
${self.sched_fence()}\
% elif st[0] == 's':

    // Chunk ${st[1]} of B: k-tiles ${plan.chunks[st[1]][0]}..${plan.chunks[st[1]][-1]}
${load_stage(st[1], full)}\
${self.sched_fence()}\
% elif st[0] == 'w':
${store_stage(st[1], st[2])}\
% elif st[0] == 'sync':
    __syncthreads();
% elif st[0] == 'r':
${read_b(st[1], st[2])}\
% elif st[0] == 'm':
${mfmas(st[1])}\
% endif
% endfor
</%def>

${self.prologue()}\
    // Blocks past n do nothing; a full block has all its 64 columns < n
    if (64*blockIdx.x >= n)
        return;
% if len(paths) == 2:
    const bool full = 64*blockIdx.x + 64 <= n;
% endif
    const int lane = threadIdx.x, g = lane >> 4, t = lane & 15;
% if ms > 1:
    const int wave = __builtin_amdgcn_readfirstlane(threadIdx.y);
% else:
    const int wave = 0;
% endif

    // This lane's columns: col, col+1, col+32, col+33 in N-tiles 0..3
    const int col = 64*blockIdx.x + 2*t, nleft = n - col;
    const double* __restrict__ afrag = ${afrag}[wave][0] + lane;

    // This lane's rows of C: ${16*plan.per}*wave + g + 16i + 4v for element v
    // of acc<i>_<nt>, and how many of them (from row 0 of m-tile 0) exist
    ${dtype}* cw = c + (${16*plan.per}*wave + g)*ldcl + col;
    const int mleft = ${m} - ${16*plan.per}*wave - g;
    const gimmik_v4d zero4 = {0.0, 0.0, 0.0, 0.0};
% for i in range(nacc):
    gimmik_v4d ${', '.join(f'acc{i}_{nt} = zero4' for nt in range(4))};
% endfor
% if not plan.lds:
    const ${dtype}* __restrict__ bc = b + col;
    const ${dtype}* __restrict__ bg = bc + g*ldbl;
% else:

    // B staging: chunks of up to ${plan.chunk_rows} rows x 64 columns in LDS;
    // this lane stages buffer row ix + vec*s*msplit of its slot s
    __shared__ __attribute__((aligned(16))) ${dtype} bsh[${plan.nbuf}][${plan.chunk_rows}][64];
% if vec == 2:
    const int h = lane >> 5, sx = 2*(lane & 31), ix = 2*wave + h;
% else:
    const int sx = lane, ix = wave;
% endif
    const int scol = 64*blockIdx.x + sx, se = n - 1 - scol;
% for buf in range(plan.nbuf):
    const ${dtype}* bl${buf} = &bsh[${buf}][g][2*t];
% endfor
% endif

    // Every value loaded, assigned by the steps
% for decl in decls:
    ${decl};
% endfor
% if len(paths) == 1:
${run_steps(paths[0], plan.steps)}\
% else:
    if (full)
    {
${run_steps(True, head)}\
    }
    else
    {
${run_steps(False, head)}\
    }
${run_steps(None, tail)}\
% endif
}
