<%inherit file="base.mako"/>
## bstream-mgroup: block group g = blockIdx.x % G computes rows
## plan.groups[g] of C for column tile blockIdx.x / G.  Within it the
## m-split bstream: wave y owns the rows sub.groups[y] of the group, the
## group's used rows of B pass through a double-buffered LDS chunk of bsz
## rows, each wave loading its share (sub.loads) into registers before the
## current chunk is consumed and writing it to LDS after; one barrier ends
## each chunk.  The group is the same for the whole block, so every wave of
## a block meets the same barriers.
<%
    W = width
    VT = self.vt(W)
    G = len(plan.groups)
%>
## Run body(y) for this thread's wave y (wave-uniform).
<%def name="per_wave(sub, body)">\
        switch (threadIdx.y)
        {
% for y in range(len(sub.groups)):
        case ${y}:
${body(y)}\
            break;
% endfor
        }
</%def>
<%def name="stage_load(sub, q, y)">\
<%def name="loads(w)">\
% for s, r in enumerate(sub.loads[q][y]):
                st${s}${'' if w == W else self.attr.FIRST} = ${self.load_b(sub.chunks[q][r], 'col' if W == 2 else 'bcol', w, ntload)};
% endfor
</%def>\
% if W == 1:
${loads(1)}\
% elif sub.loads[q][y]:
${self.guarded(loads, W, '            ')}\
% endif
</%def>
<%def name="stage_store(sub, q, y)">\
% for s, r in enumerate(sub.loads[q][y]):
            bsh[${q % 2}][${r}][threadIdx.x] = st${s};
% endfor
</%def>
<%def name="compute(sub, q, y)">\
% for a, v, r, first in sub.updates[q][y]:
            acc${a} ${'=' if first else '+='} ${lit(v)}*bsh[${q % 2}][${r}][threadIdx.x];
% endfor
</%def>
<%def name="finish_rows(g, y)">\
<%
    r0, _, sub = plan.groups[g]
    s0, s1 = sub.groups[y]
    touched = {a for per_q in sub.updates for a, _, _, _ in per_q[y]}
%>\
<%def name="rows(w)">\
% for i in range(s0, s1):
${self.finish(r0 + i, 'col', w, (f'acc{i - s0}' + ('' if w == W else self.attr.FIRST)) if i - s0 in touched else None)}\
% endfor
</%def>\
${self.guarded(rows, W, '            ')}\
</%def>
${self.prologue()}\
    const int group = blockIdx.x % ${G};
    const int col = ${W}*((blockIdx.x / ${G})*blockDim.x + threadIdx.x);
% if W == 1:
% if n is None:
    if (n <= 0)
        return;
% endif
    // B is read at a column inside n in every lane: loads need no guard
    const int bcol = col < n ? col : n - 1;
% endif
    __shared__ ${VT} bsh[2][${bsz}][${block[0]}];
    ${VT} ${', '.join(f'acc{a}' for a in range(plan.nacc))};
% if plan.nstage:
    ${VT} ${', '.join(f'st{s}' for s in range(plan.nstage))};
% endif

    switch (group)
    {
% for g, (r0, r1, sub) in enumerate(plan.groups):
    case ${g}:
    {
        // Rows ${r0}-${r1 - 1} of C
% if sub.chunks:
${per_wave(sub, lambda y: stage_load(sub, 0, y) + stage_store(sub, 0, y))}\
        __syncthreads();
% endif
% for q in range(len(sub.chunks)):

        // Chunk ${q}: B rows ${', '.join(str(j) for j in sub.chunks[q])}
% if q + 1 < len(sub.chunks):
${per_wave(sub, lambda y: stage_load(sub, q + 1, y) + compute(sub, q, y) + stage_store(sub, q + 1, y))}\
        __syncthreads();
% else:
${per_wave(sub, lambda y: compute(sub, q, y))}\
% endif
% endfor

${per_wave(sub, lambda y: finish_rows(g, y))}\
        break;
    }
% endfor
    }
}
