<%inherit file="base.mako"/>
## bstream-msplit: the rows of A are split across the block's blockDim.y
## warps (wavefronts on AMD; plan.groups); the used rows of B are staged
## through a double buffered shared-memory (LDS) chunk of bsz rows, which
## each warp loads a share of.
## The chunks are loaded in batches (plan.batches): a batch's global loads
## are issued before the FMAs of the chunk ahead of it, into registers its
## chunks are written to LDS from, one chunk after each chunk's FMAs;
## batched (the platform batches loads, BATCH_LOADS): those writes are
## one code for every warp (stage_store_all), not a case of the switch.
## crows (where C's old values are read after the chunks): per warp, runs
## of rows whose old values are loaded together before their stores.
<%
    W = width
    VT = self.vt(W)
    nstage = plan.nstage
%>
## Run body(y) for this thread's warp y (warp-uniform).
<%def name="per_wave(body)">\
    switch (threadIdx.y)
    {
% for y in range(len(plan.groups)):
    case ${y}:
${body(y)}\
        break;
% endfor
    }
</%def>
<%def name="stage_load(batch, y)">\
<%def name="loads(w)">\
% for q in batch:
% for s, r in zip(plan.slots[q][y], plan.loads[q][y]):
            st${s}${'' if w == W else self.attr.FIRST} = ${self.load_b(plan.chunks[q][r], 'col', w, context.get('ntload', False))};
% endfor
% endfor
</%def>\
${self.guarded(loads, W)}\
</%def>
<%def name="stage_store(q, y)">\
% for s, r in zip(plan.slots[q][y], plan.loads[q][y]):
        bsh[${q % 2}][${r}][threadIdx.x] = st${s};
% endfor
</%def>
## The same for every warp at once (no switch: no path of the kernel
## leaves a warp's loads in flight past it): warp y writes chunk row
## y + s*msplit from its s-th staging register of chunk q.
<%def name="stage_store_all(q)">\
<%
    ms = len(plan.groups)
    rows = len(plan.chunks[q])
%>\
% for s, slot in enumerate(plan.slots[q][0]):
% if rows - s*ms >= ms:
    bsh[${q % 2}][threadIdx.y + ${s*ms}][threadIdx.x] = st${slot};
% else:
    if (threadIdx.y < ${rows - s*ms})
        bsh[${q % 2}][threadIdx.y + ${s*ms}][threadIdx.x] = st${slot};
% endif
% endfor
</%def>
<%def name="store_chunk(q)">\
% if batched:
${stage_store_all(q)}\
% else:
${per_wave(lambda y: stage_store(q, y))}\
% endif
</%def>
<%def name="compute(q, y)">\
% for a, v, r, first in plan.updates[q][y]:
        acc${a} ${'=' if first and not preload_c else '+='} ${lit(v)}*bsh[${q % 2}][${r}][threadIdx.x];
% endfor
</%def>
<%def name="preload(y)">\
<%
    r0, r1 = plan.groups[y]
%>\
<%def name="rows(w)">\
% for i in range(r0, r1):
            acc${i - r0}${'' if w == W else self.attr.FIRST} = ${'' if beta == 1 else betalit + '*'}${self.load_c(i, 'col', w)};
% endfor
</%def>\
${self.guarded(rows, W)}\
</%def>
<%def name="finish_rows(y)">\
<%
    r0, r1 = plan.groups[y]
    touched = {a for per_q in plan.updates for a, _, _, _ in per_q[y]}
%>\
<%def name="rows(w)">\
% if crows is not None:
% for run in crows[y]:
% for i in run:
            const ${self.vt(w)} cin${i} = ${self.load_c(i, 'col', w)};
% endfor
% for i in run:
${self.finish(i, 'col', w, f'acc{i - r0}' + ('' if w == W else self.attr.FIRST) if i - r0 in touched else None, f'cin{i}')}\
% endfor
% endfor
% else:
% for i in range(r0, r1):
<%
    acc = f'acc{i - r0}' + ('' if w == W else self.attr.FIRST)
%>\
% if preload_c:
    ${self.store_c(i, 'col', w, acc)};
% else:
${self.finish(i, 'col', w, acc if i - r0 in touched else None)}\
% endif
% endfor
% endif
</%def>\
${self.guarded(rows, W)}\
</%def>
${self.prologue()}\
    const int col = ${W}*(blockIdx.x*blockDim.x + threadIdx.x);
    __shared__ ${VT} bsh[2][${bsz}][${block[0]}];
    ${VT} ${', '.join(f'acc{a}' for a in range(plan.nacc))};
    ${VT} ${', '.join(f'st{s}' for s in range(nstage))};
% if preload_c:

    // C, scaled by beta, is the starting value of the accumulators
${per_wave(preload)}\
% endif

    // Stage chunk 0 of B
${per_wave(lambda y: stage_load(plan.batches[0], y))}\
${store_chunk(0)}\
    __syncthreads();
% for q in range(len(plan.chunks)):

    // Chunk ${q}: B rows ${', '.join(str(j) for j in plan.chunks[q])}
% if plan.batch_at(q + 1):
${per_wave(lambda y: stage_load(plan.batch_at(q + 1), y))}\
% endif
${per_wave(lambda y: compute(q, y))}\
% if q + 1 < len(plan.chunks):
${store_chunk(q + 1)}\
    __syncthreads();
% endif
% endfor

${per_wave(finish_rows)}\
}
