<%inherit file="base.mako"/>
## bstream-mgroup: block group g = blockIdx.x % G computes rows
## plan.groups[g] of C for column tile blockIdx.x / G.  Within it the
## m-split bstream: wave y owns the rows sub.groups[y] of the group, the
## group's used rows of B pass through LDS in chunks of bsz rows, each wave
## loading its share into registers before the current chunk is consumed
## and writing it to LDS after: with nbuf 2 buffers one barrier ends each
## chunk, with one buffer a second barrier comes before the LDS writes.
## The group is the same for the whole block, so every wave of a block
## meets the same barriers.
## Where the platform batches loads, the chunks are loaded in load batches
## (sub.batches): a batch's loads all go out before the chunk ahead of it
## is consumed, each chunk written to LDS from its own staging registers
## (sub.slots) in turn.
<%
    W = width
    VT = self.vt(W)
    G = len(plan.groups)
%>
## Run body(y) for this thread's wave y (wave-uniform).
<%def name="per_wave(sub, body)">\
        switch (wave)
        {
% for y in range(len(sub.groups)):
        case ${y}:
${body(y)}\
            break;
% endfor
        }
</%def>
## Stage chunk q of a group: wave y loads chunk rows y, y + msplit, ...;
## the B row of each is selected by the wave index (scalar), so the loads
## and LDS writes are the same code in every wave (no branch keeps loads
## of other waves' code in flight).  A wave with one row fewer loads the
## chunk's first row again into a slot no wave reads.
<%def name="stage_load(g, sub, batch)">\
<%
    ms = len(sub.groups)
%>\
% for q in batch:
<%
    ch = sub.chunks[q]
%>\
% for s in range(-(-len(ch) // ms)):
<%
    rows = [ch[y + ms*s] if y + ms*s < len(ch) else ch[0] for y in range(ms)]
    sel = str(rows[-1])
    for y in range(ms - 2, -1, -1):
        sel = sel if rows[y] == rows[y + 1] and sel == str(rows[y]) else f'wave == {y} ? {rows[y]} : {sel}'
%>\
        const int j${s}_${q} = ${sel};
% endfor
% endfor
<%def name="loads(w)">\
% for q in batch:
% for s in range(-(-len(sub.chunks[q]) // ms)):
<%
    reg = f'st{sub.slots[q][0][s]}' + ('' if w == W else self.attr.FIRST)
    val = self.load_b(f'j{s}_{q}', 'col' if W == 2 else 'bcol', w)
%>\
            ${reg} = ${val};
% endfor
% endfor
</%def>\
% if W == 1:
${loads(1)}\
% else:
${self.guarded(loads, W, '        ')}\
% endif
% if c_joins[g] and batch is sub.batches[-1]:
${c_loads(g, 1, 'bcol')}\
% endif
${self.sched_fence()}\
</%def>
<%def name="stage_store(sub, q)">\
<%
    ms = len(sub.groups)
    ns = -(-len(sub.chunks[q]) // ms)
    slots = sub.slots[q][0]
%>\
% for s in range(ns):
        bsh[${q % nbuf}][wave + ${ms*s}][threadIdx.x] = st${slots[s]};
% endfor
</%def>
<%def name="compute(sub, q, y)">\
% for a, v, r, first in sub.updates[q][y]:
            acc${a} ${'=' if first else '+='} ${lit(v)}*bsh[${q % nbuf}][${r}][threadIdx.x];
% endfor
</%def>
<%def name="finish_rows(g, y)">\
<%
    r0, _, sub = plan.groups[g]
    s0, s1 = sub.groups[y]
    touched = {a for per_q in sub.updates for a, _, _, _ in per_q[y]}
%>\
<%def name="rows(w)">\
<%
    acc = lambda i: f'acc{i - s0}' + ('' if w == W else self.attr.FIRST)
    vt = self.vt(w)
%>\
% if beta == 0:
% for i in range(s0, s1):
${self.finish(r0 + i, 'col', w, acc(i) if i - s0 in touched else None)}\
% endfor
% else:
## C read: every row's C value loaded before the first store, so that the
## loads go out together instead of one wait a row
% for i in range(s0, s1):
% if beta != 1 or i - s0 in touched:
            const ${vt} cv${i - s0} = ${self.load_c(r0 + i, 'col', w)};
% endif
% endfor
% for i in range(s0, s1):
    ${self.finish(r0 + i, 'col', w, acc(i) if i - s0 in touched else None, cold=f'cv{i - s0}')}\
% endfor
% endif
</%def>\
${self.guarded(rows, W, '            ')}\
</%def>
## c_ahead (beta != 0): the old C values of a wave's rows are loaded by
## code the same in every wave (rows selected by the wave index, a wave
## with fewer rows loading its last row again) at column ccol, fenced,
## then each wave stores its rows in its case: one wait for them a group,
## not one a case.  c_joins[g]: loaded with the group's last load batch
## (one column a thread, at the clamped column bcol), before its fence.
<%def name="c_loads(g, w, ccol)">\
<%
    r0, _, sub = plan.groups[g]
    nmax = max(s1 - s0 for s0, s1 in sub.groups)
    vt = self.vt(w)
%>\
% for t in range(nmax):
<%
    rows = [r0 + min(s0 + t, s1 - 1) for s0, s1 in sub.groups]
    sel = str(rows[-1])
    for y in range(len(rows) - 2, -1, -1):
        sel = sel if rows[y] == rows[y + 1] and sel == str(rows[y]) else f'wave == {y} ? {rows[y]} : {sel}'
%>\
            const int ci${t} = ${sel};
% endfor
% for t in range(nmax):
            const ${vt} cv${t} = ${self.load_c(f'ci{t}', ccol, w)};
% endfor
</%def>
<%def name="finish_ahead(g, w)">\
<%
    r0, _, sub = plan.groups[g]
    suffix = '' if w == W else self.attr.FIRST
%>\
% if not c_joins[g]:
${c_loads(g, w, 'col')}\
${self.sched_fence()}\
% endif
<%def name="stores(y)">\
<%
    s0, s1 = sub.groups[y]
    touched = {a for per_q in sub.updates for a, _, _, _ in per_q[y]}
%>\
% for i in range(s0, s1):
    ${self.finish(r0 + i, 'col', w, f'acc{i - s0}{suffix}' if i - s0 in touched else None, cold=f'cv{i - s0}')}\
% endfor
</%def>\
${per_wave(sub, stores)}\
</%def>
${self.prologue()}\
${self.tiles_open()}\
    const int group = ${bid} % ${G};
    const int wave = ${self.wave_uniform('threadIdx.y')};
    const int col = ${W}*((${bid} / ${G})*blockDim.x + threadIdx.x);
% if W == 1:
% if n is None:
    if (n <= 0)
        return;
% endif
    // B is read at a column inside n in every lane: loads need no guard
    const int bcol = col < n ? col : n - 1;
% endif
    __shared__ ${VT} bsh[${nbuf}][${bsz}][${block[0]}];
    ${VT} ${', '.join(f'acc{a}' for a in range(plan.nacc))};
% if plan.nstage:
    ${VT} ${', '.join(f'st{s}' for s in range(plan.nstage))};
% endif

    switch (group)
    {
% for g, (r0, r1, sub) in enumerate(plan.groups):
    case ${g}:
    {
${self.sched_fence()}\
        // Rows ${r0}-${r1 - 1} of C
% if sub.chunks:
${stage_load(g, sub, sub.batches[0])}\
${stage_store(sub, 0)}\
        __syncthreads();
% endif
% for q in range(len(sub.chunks)):

        // Chunk ${q}: B rows ${', '.join(str(j) for j in sub.chunks[q])}
% if sub.batch_at(q + 1):
${stage_load(g, sub, sub.batch_at(q + 1))}\
% endif
${per_wave(sub, lambda y: compute(sub, q, y))}\
% if q + 1 < len(sub.chunks):
% if nbuf == 1:
        __syncthreads();
% endif
${stage_store(sub, q + 1)}\
        __syncthreads();
% endif
% endfor

% if beta != 0 and c_ahead:
${self.guarded(lambda w: finish_ahead(g, w), W, '        ')}\
% else:
${per_wave(sub, lambda y: finish_rows(g, y))}\
% endif
        break;
    }
% endfor
    }
${self.tiles_close()}\
}
