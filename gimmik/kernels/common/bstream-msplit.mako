<%inherit file="base.mako"/>
<%!
    from gimmik.plans import wave_select
%>\
## bstream-msplit: the rows of A are split across the block's blockDim.y
## warps (wavefronts on AMD; plan.groups); the used rows of B are staged
## through a double buffered shared-memory (LDS) chunk of bsz rows, which
## each warp loads a share of.
## The chunks are loaded in batches (plan.batches): a batch's global loads
## are issued before the FMAs of the chunk ahead of it, into registers its
## chunks are written to LDS from, one chunk after each chunk's FMAs (a
## first batch's chunk 1 with chunk 0, into the second buffer);
## batched (Target.batch_loads): the loads and those
## writes are one code for every warp (stage_load_all, store_chunk),
## not cases of the switch: the row a warp loads is selected by its
## wave-uniform index (stage_rows), so a batch is one path and one wait.
## A two-column value at a ragged last column is then loaded whole: width
## 2 needs even row strides, so its second column is in the row's padding
## (only stores are guarded column by column).
## cruns (where C's old values are read after the chunks): runs of
## accumulator positions whose old values every warp loads by one code
## (c_positions), then waits for once, before its stores; c_joins: one
## run, loaded ahead of the last batch's B rows.
<%
    W = width
    VT = self.vt(W)
    nstage = plan.nstage
    scale_c = batched and preload_c and beta != 1
%>
## Run body(y) for this thread's warp y (warp-uniform).  A switch on
## threadIdx.y, not on the scalar wave index: clang-19 took scalar cases
## of large row groups past 256 VGPRs (p5-quad-m460, width 2: 176 to 256
## and 64 AGPRs).
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
            st${s}${'' if w == W else self.attr.FIRST} = ${self.load_b(plan.chunks[q][r], 'col', w)};
% endfor
% endfor
</%def>\
${self.guarded(loads, W)}\
</%def>
## One code for every warp: the loads of a batch (first, where C joins
## it, the old values of C; in the first, preloaded C), the row each warp
## loads selected by its index.  One guarded block: loads pending across
## two blocks' joins are waited for apart.
<%def name="stage_load_all(batch)">\
    if (col < n)
    {
% if preload_c and batch is plan.batches[0]:
${preload_all()}\
% endif
% if c_joins and batch is plan.batches[-1]:
${c_load_all(cruns[0])}\
% endif
% for q in batch:
% for s, slot in enumerate(plan.slots[q][0]):
        st${slot} = ${self.load_b(wave_select([plan.chunks[q][r] for r in stage_rows[q][s]]), 'col', W)};
% endfor
% endfor
    }
</%def>
<%def name="c_load_all(run)">\
% for a in run:
        cin${a} = ${self.load_c(wave_select(c_positions[a]), 'col', W)};
% endfor
</%def>
<%def name="load_batch(batch)">\
% if batched:
${stage_load_all(batch)}\
% else:
${per_wave(lambda y: stage_load(batch, y))}\
% endif
</%def>
<%def name="stage_store(q, y)">\
% for s, r in zip(plan.slots[q][y], plan.loads[q][y]):
        bsh[${q % 2}][${r}][threadIdx.x] = st${s};
% endfor
</%def>
## Batched, one code for every warp: warp y writes chunk row
## stage_rows[q][s][y] from its s-th staging register of chunk q (a warp
## without a row of its own there writes the chunk's last, the value its
## owner writes: no branch, whose paths would wait apart).
<%def name="store_chunk(q)">\
% if batched:
% for s, slot in enumerate(plan.slots[q][0]):
    bsh[${q % 2}][${wave_select(stage_rows[q][s])}][threadIdx.x] = st${slot};
% endfor
% else:
${per_wave(lambda y: stage_store(q, y))}\
% endif
</%def>
<%def name="compute(q, y)">\
% for a, v, r, first in plan.updates[q][y]:
% if first and scale_c:
        acc${a} = ${betalit}*acc${a} + ${lit(v)}*bsh[${q % 2}][${r}][threadIdx.x];
% else:
        acc${a} ${'=' if first and not preload_c else '+='} ${lit(v)}*bsh[${q % 2}][${r}][threadIdx.x];
% endif
% endfor
</%def>
## One code for every warp: C's old values into the accumulators.
<%def name="preload_all()">\
% for a in range(plan.nacc):
        acc${a} = ${self.load_c(wave_select(c_positions[a]), 'col', W)};
% endfor
</%def>
<%def name="preload(y)">\
<%
    r0, r1 = plan.groups[y]
%>\
<%def name="rows(w)">\
% for i in range(r0, r1):
            acc${i - r0}${'' if w == W else self.attr.FIRST} = ${self.beta_scaled(self.load_c(i, 'col', w))};
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
% for i in range(r0, r1):
<%
    acc = f'acc{i - r0}' + ('' if w == W else self.attr.FIRST)
%>\
% if preload_c and scale_c and i - r0 not in touched:
    ${self.store_c(i, 'col', w, betalit + '*' + acc)};
% elif preload_c:
    ${self.store_c(i, 'col', w, acc)};
% else:
${self.finish(i, 'col', w, acc if i - r0 in touched else None)}\
% endif
% endfor
</%def>\
${self.guarded(rows, W)}\
</%def>
## Rows of warp y at the positions of a run, from the old values
## loaded by c_load_all.
<%def name="finish_run(run, y)">\
<%
    r0, r1 = plan.groups[y]
    touched = {a for per_q in plan.updates for a, _, _, _ in per_q[y]}
%>\
<%def name="rows(w)">\
<%
    sfx = '' if w == W else self.attr.FIRST
%>\
% for a in run:
% if a in c_reads[y]:
${self.finish(r0 + a, 'col', w, f'acc{a}{sfx}' if a in touched else None, f'cin{a}{sfx}')}\
% endif
% endfor
</%def>\
${self.guarded(rows, W)}\
</%def>
${self.prologue()}\
    const int col = ${W}*(blockIdx.x*blockDim.x + threadIdx.x);
    __shared__ ${VT} bsh[2][${bsz}][${block[0]}];
    ${VT} ${', '.join(f'acc{a}' for a in range(plan.nacc))};
    ${VT} ${', '.join(f'st{s}' for s in range(nstage))};
% if batched:
    const int wave = ${self.wave_uniform('threadIdx.y')};
% endif
% if cruns:
    ${VT} ${', '.join(f'cin{a}' for run in cruns for a in run)};
% endif
% if preload_c and not batched:

    // C, scaled by beta, is the starting value of the accumulators
${per_wave(preload)}\
% endif

<%
    # the first load batch holds chunk 1 too: it goes to the second
    # buffer with chunk 0, before the first barrier (its loads are not
    # left pending across the waves' cases, where clang-19 waited for
    # them in each case); chunk 2 then waits for every wave to be done
    # with chunk 0, whose buffer it takes
    early = len(plan.batches[0]) > 1
%>\
    // Stage chunk 0${' and chunk 1' if early else ''} of B${' (and C, the starting value of the accumulators)' if preload_c and batched else ''}
${load_batch(plan.batches[0])}\
${store_chunk(0)}\
% if early:
${store_chunk(1)}\
% endif
    __syncthreads();
% for q in range(len(plan.chunks)):

    // Chunk ${q}: B rows ${', '.join(str(j) for j in plan.chunks[q])}
% if plan.batch_at(q + 1):
${load_batch(plan.batch_at(q + 1))}\
% endif
${per_wave(lambda y: compute(q, y))}\
% if q + 1 < len(plan.chunks) and not (early and q == 0):
% if early and q == 1:
    __syncthreads();
% endif
${store_chunk(q + 1)}\
    __syncthreads();
% endif
% endfor

% if cruns:
% for run in cruns:
% if not c_joins:
    // Old values of C: rows ${', '.join(str(a) for a in run)} of each warp
    if (col < n)
    {
${c_load_all(run)}\
        ${self.wait_loads()};
    }
% endif
${per_wave(lambda y: finish_run(run, y))}\
% endfor
% else:
${per_wave(finish_rows)}\
% endif
}
