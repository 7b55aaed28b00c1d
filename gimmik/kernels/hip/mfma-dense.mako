<%inherit file="base.mako"/>
## mfma-dense: A, baked in the fragment order of the f64 16x16x4 MFMA
## (plan.bake, see gimmik/fragments.py), is multiplied on the matrix cores.
##
## Each 64-lane wavefront covers the block's 64 columns as four 16-wide
## N-tiles: lane L = 16g + t handles columns col, col+1 (N-tiles 0, 1) and
## col+32, col+33 (N-tiles 2, 3), col = 64*block + 2t; that is, column t of
## N-tile nt is 64*block + 32*(nt/2) + 2t + nt%2.  So every MFMA operand and
## result of a lane is two pairs of columns, and the 16 lanes of a row read
## or write 256 contiguous bytes per access (global memory and LDS, free of
## bank conflicts).  Wavefront y (one per
## blockDim.y) owns the m-tiles y*per .. y*per + per-1 and keeps only their
## accumulators acc<i>_<nt> (i: its i-th m-tile, nt: N-tile) live.  All
## wavefronts run the same code: the fragment table has one row per
## wavefront (plan.frags), zero where a wavefront's tile is all-zero.
##
## msplit = 1 (direct): B goes from global memory straight into registers,
## one k-tile at a time, skipping all-zero tiles of A.  msplit > 1: the block
## stages the rows of B that A uses in LDS, chunk by chunk (plan.chunks, at
## most 8 k-tiles), padding rows zero-filled (each wavefront loads its share,
## plan.stage), and every wavefront multiplies its m-tiles by every chunk.
## pipe 1: the next k-tile's (or chunk's) global loads are issued before the
## current MFMAs (registers, then a second LDS buffer); pipe 2: in addition,
## each k-tile's fragment is read from LDS one k-tile ahead of its MFMAs.
##
## Every MFMA is executed by all 64 lanes in wave-uniform control flow (the
## wavefront index goes through readfirstlane): only loads and stores are
## guarded, and columns past n are loaded as zeros.
<%
    bake = plan.bake
    tl = bake.tiling
    ms = plan.msplit
    nacc = plan.ntiles_per_wave
    nchunk = len(plan.chunks)
    R = plan.chunk_rows
    nstage = max([len(ld) for per_q in plan.stage for ld in per_q] or [0])
    VB = 'gimmik_v2' if vec == 2 else dtype
    afrag = f'{kname}_afrag'

    def upd(x, cval):
        if beta == 0:
            return x
        if beta == 1:
            return f'{x} + {cval}'
        return f'{x} + {betalit}*{cval}'
%>
typedef double gimmik_v4d __attribute__((vector_size(32)));

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

// B at p[0], p[1], p[32], p[33] (one lane's columns of N-tiles 0..3), zero
// from column n on (nleft: columns left from p[0])
static __device__ inline gimmik_v4d
${kname}_ldb4(const double* __restrict__ p, int nleft)
{
    gimmik_v4d v = {0.0, 0.0, 0.0, 0.0};
    if (nleft >= 34)
    {
% if vec == 2:
        const gimmik_v2 lo = *(const gimmik_v2*) p;
        const gimmik_v2 hi = *(const gimmik_v2*) (p + 32);
        v[0] = lo[0]; v[1] = lo[1]; v[2] = hi[0]; v[3] = hi[1];
% else:
        v[0] = p[0]; v[1] = p[1]; v[2] = p[32]; v[3] = p[33];
% endif
    }
    else
    {
        if (nleft > 0) v[0] = p[0];
        if (nleft > 1) v[1] = p[1];
        if (nleft > 32) v[2] = p[32];
    }
    return v;
}

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

% if vec == 2:
// B at p[0..1] for staging, zero from column n on
static __device__ inline gimmik_v2
${kname}_ldb2(const double* __restrict__ p, int nleft)
{
    gimmik_v2 v = {0.0, 0.0};
    if (nleft >= 2)
        v = *(const gimmik_v2*) p;
    else if (nleft == 1)
        v[0] = p[0];
    return v;
}

% endif
% endif
// p[0], p[1], p[32], p[33] = x0..x3${'' if beta == 0 else ' + beta*(their values)'}, non-temporally; columns
// from n on (nleft: columns left from p[0]) untouched
static __device__ inline void
${kname}_stc4(double* __restrict__ p, int nleft,
${' '*len(kname)}       double x0, double x1, double x2, double x3)
{
    if (nleft >= 34)
    {
% if vec == 2:
        const gimmik_v2 lo = {x0, x1}, hi = {x2, x3};
        __builtin_nontemporal_store(${upd('lo', '(*(gimmik_v2*) p)')}, (gimmik_v2*) p);
        __builtin_nontemporal_store(${upd('hi', '(*(gimmik_v2*) (p + 32))')}, (gimmik_v2*) (p + 32));
% else:
        __builtin_nontemporal_store(${upd('x0', 'p[0]')}, p);
        __builtin_nontemporal_store(${upd('x1', 'p[1]')}, p + 1);
        __builtin_nontemporal_store(${upd('x2', 'p[32]')}, p + 32);
        __builtin_nontemporal_store(${upd('x3', 'p[33]')}, p + 33);
% endif
    }
    else
    {
        if (nleft > 0) __builtin_nontemporal_store(${upd('x0', 'p[0]')}, p);
        if (nleft > 1) __builtin_nontemporal_store(${upd('x1', 'p[1]')}, p + 1);
        if (nleft > 32) __builtin_nontemporal_store(${upd('x2', 'p[32]')}, p + 32);
    }
}

## Run body(y) for wavefront y (wave-uniform: a scalar branch; no MFMA).
<%def name="per_wave(body)">\
% if ms == 1:
${body(0)}\
% else:
    switch (wave)
    {
% for y in range(ms):
    case ${y}:
    {
${body(y)}\
        break;
    }
% endfor
    }
% endif
</%def>

## The four MFMAs (one per N-tile) of slot s into m-tile i, B in bv.
<%def name="mfmas(i, s, bv)">\
    {
        const double a = afrag[${64*s}];
% for nt in range(4):
        acc${i}_${nt} = __builtin_amdgcn_mfma_f64_16x16x4f64(a, ${bv}[${nt}], acc${i}_${nt}, 0, 0, 0);
% endfor
    }
</%def>

## Direct path: pointer and column count of this lane's B row in k-tile kt.
<%def name="ldb_direct(kt)" buffered="True">\
<%
    rows = [r for r in tl.ktile_rows(kt) if r >= 0]
    nl = 'nleft' if len(rows) == 4 else f'(g < {len(rows)} ? nleft : 0)'
    if rows == list(range(rows[0], rows[0] + len(rows))):
        ptr = f'bg + {rows[0]}*ldbl'
    else:
        sel = str(rows[-1])
        for gg in reversed(range(len(rows) - 1)):
            sel = f'g == {gg} ? {rows[gg]} : {sel}'
        ptr = f'b + ({sel})*ldbl + col'
%>\
${kname}_ldb4(${ptr}, ${nl})\
</%def>

## LDS path: stage chunk q's B rows (wavefront y's share) into registers...
<%def name="stage_load(q, y)">\
% for si, (s0, rows) in enumerate(plan.stage[q][y]):
% if vec == 1 and rows[0] < 0:
        st${si} = 0.0;
% elif vec == 1:
        st${si} = scol < n ? b[${rows[0]}*ldbl + scol] : 0.0;
% elif rows[0] < 0:
        st${si} = gimmik_v2{0.0, 0.0};
% elif rows[1] < 0:
        st${si} = ${kname}_ldb2(b + ${rows[0]}*ldbl + scol, h ? 0 : n - scol);
% else:
        st${si} = ${kname}_ldb2(b + (h ? ${rows[1]} : ${rows[0]})*ldbl + scol, n - scol);
% endif
% endfor
</%def>

## ... and from the registers into LDS buffer buf.
<%def name="stage_store(q, y, buf)">\
% for si, (s0, rows) in enumerate(plan.stage[q][y]):
% if vec == 1:
        bsh[${buf}][${s0}][sx] = st${si};
% else:
        *(gimmik_v2*) &bsh[${buf}][${s0} + h][sx] = st${si};
% endif
% endfor
</%def>

## The MFMAs over chunk q, its B in LDS buffer buf.
<%def name="compute(q, buf)">\
<%
    items = plan.work[q]
    k0 = plan.chunks[q][0]
%>\
% for idx, (kt, ts) in enumerate(items):
% if pipe == 2:
% if idx == 0:
    bk = ${kname}_lds4(bl${buf} + ${256*(kt - k0)});
% endif
% if idx + 1 < len(items):
    bn = ${kname}_lds4(bl${buf} + ${256*(items[idx + 1][0] - k0)});   // one k-tile ahead
% endif
% else:
    bk = ${kname}_lds4(bl${buf} + ${256*(kt - k0)});
% endif
    // k-tile ${kt}
% for i, s in ts:
${mfmas(i, s, 'bk')}\
% endfor
% if pipe == 2 and idx + 1 < len(items):
    bk = bn;
% endif
% endfor
</%def>

## This wavefront's rows of C from its accumulators (rows past m skipped).
<%def name="finish()">\
% for i in range(nacc):
% for v in range(4):
% if 16*i + 4*v < m:
    if (${16*i + 4*v} < mleft) ${kname}_stc4(cw + ${16*i + 4*v}*ldcl, nleft, acc${i}_0[${v}], acc${i}_1[${v}], acc${i}_2[${v}], acc${i}_3[${v}]);
% endif
% endfor
% endfor
</%def>

${self.prologue()}\
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
    const ${dtype}* bg = b + g*ldbl + col;
% if pipe >= 1:
    gimmik_v4d bk = ${ldb_direct(plan.chunks[0][0])}, bn;
% else:
    gimmik_v4d bk;
% endif
% for q, (kt,) in enumerate(plan.chunks):

    // k-tile ${kt}: B rows ${', '.join(str(r) for r in tl.ktile_rows(kt) if r >= 0)}
% if pipe == 0:
    bk = ${ldb_direct(kt)};
% elif q + 1 < nchunk:
    bn = ${ldb_direct(plan.chunks[q + 1][0])};   // the next k-tile's B, ahead
% endif
% for kt_, ts in plan.work[q]:
% for i, s in ts:
${mfmas(i, s, 'bk')}\
% endfor
% endfor
% if pipe >= 1 and q + 1 < nchunk:
    bk = bn;
% endif
% endfor
% else:

    // B staging: chunks of up to ${R} rows x 64 columns in LDS
    __shared__ __attribute__((aligned(16))) ${dtype} bsh[${plan.nbuf}][${R}][64];
% if vec == 2:
    const int h = lane >> 5, sx = 2*(lane & 31), scol = 64*blockIdx.x + sx;
% else:
    const int sx = lane, scol = 64*blockIdx.x + sx;
% endif
    ${VB} ${', '.join(f'st{s}' for s in range(nstage))};
% for buf in range(plan.nbuf):
    const ${dtype}* bl${buf} = &bsh[${buf}][g][2*t];
% endfor
    gimmik_v4d bk${', bn' if pipe == 2 else ''};

    // Chunk 0 of B into LDS
${per_wave(lambda y: capture(stage_load, 0, y) + capture(stage_store, 0, y, 0))}\
    __syncthreads();
% for q in range(nchunk):
<%
    buf = q % plan.nbuf
    nxt = q + 1 < nchunk
%>
    // Chunk ${q}: k-tiles ${plan.chunks[q][0]}..${plan.chunks[q][-1]}
% if pipe >= 1:
% if nxt:
${per_wave(lambda y: capture(stage_load, q + 1, y))}\
% endif
${compute(q, buf)}\
% if nxt:
${per_wave(lambda y: capture(stage_store, q + 1, y, (q + 1) % 2))}\
    __syncthreads();
% endif
% else:
${compute(q, 0)}\
% if nxt:
    __syncthreads();
${per_wave(lambda y: capture(stage_load, q + 1, y) + capture(stage_store, q + 1, y, 0))}\
    __syncthreads();
% endif
% endif
% endfor
% endif

    // C = A*B${'' if beta == 0 else ' + beta*C'}
${finish()}\
}
