<%inherit file="base.mako"/>
<%!
    from gimmik.plans import wave_select
%>\
## cstream-ksplit: the used columns of A are split across the block's
## blockDim.y warps (wavefronts on AMD; plan.kcols); each sums its share of
## every row of C, hands the partial sums of rows it does not own to their
## owner through shared memory (LDS),
## and each owner finishes its rows.
## batched (the platform batches loads, BATCH_LOADS): a warp's B values
## (ld<s>), preloaded C and C's old values are loaded by one code for every
## warp, the row selected by the warp's wave-uniform index (stage_rows,
## c_positions), and waited for once before the warps' cases use them.
## cruns (where C's old values are read in the finish): runs of owned-row
## positions whose old values are loaded together before their stores;
## c_joins: one run, loaded with B's values.
<%
    ks = block[1]
    owned = [[i for i in range(m) if plan.owner[i] == y] for y in range(ks)]
    nown = max(len(o) for o in owned)
    # which warps hand a partial of row i over
    givers = [[y for y in range(ks) if plan.slot[y][i] is not None and plan.terms[y][i]] for i in range(m)]
    # the value a warp's B row j is in: b<j> in its case, ld<s> batched
    bname = [{j: f'ld{s}' if batched else f'b{j}' for s, j in enumerate(plan.loads[y])} for y in range(ks)]
%>
## Run body(y) for this thread's warp y: a switch on threadIdx.y, not on
## the scalar wave index (bstream-msplit.mako says why).
<%def name="per_wave(body)">\
    switch (threadIdx.y)
    {
% for y in range(ks):
    case ${y}:
        if (col < n)
        {
${body(y)}\
        }
        break;
% endfor
    }
</%def>
<%def name="partials(y)">\
% for i in owned[y]:
% if preload_c and batched:
% if beta != 1:
            own${owned[y].index(i)} = ${betalit}*own${owned[y].index(i)};
% endif
% elif preload_c:
            own${owned[y].index(i)} = ${'' if beta == 1 else betalit + '*'}${self.load_c(i, 'col', 1)};
% endif
% endfor
% if not batched:
% for j in plan.loads[y]:
            const ${dtype} b${j} = ${self.load_b(j, 'col', 1)};
% endfor
% endif
% for i in range(m):
<%
    expr = ' + '.join(f'{lit(v)}*{bname[y][j]}' for j, v in plan.terms[y][i])
%>\
% if not expr:
% elif plan.slot[y][i] is not None:
            red[${plan.slot[y][i]}][${i}][threadIdx.x] = ${expr};
% elif preload_c:
            own${owned[y].index(i)} += ${expr};
% else:
            own${owned[y].index(i)} = ${expr};
% endif
% endfor
</%def>
<%def name="finish_row(y, i, cold=None)">\
<%
    o = owned[y].index(i)
    parts = ([f'own{o}'] if preload_c or plan.terms[y][i] else []) + \
            [f'red[{plan.slot[g][i]}][{i}][threadIdx.x]' for g in givers[i]]
%>\
% if preload_c:
    ${self.store_c(i, 'col', 1, ' + '.join(parts))};
% else:
    ${self.finish(i, 'col', 1, ' + '.join(parts) or None, cold)}\
% endif
</%def>
<%def name="finish_rows(y)">\
% for i in owned[y]:
${finish_row(y, i)}\
% endfor
</%def>
## Warp y's rows at the positions of a run, from the old values loaded
## by c_load_all.
<%def name="finish_run(run, y)">\
% for o in run:
% if o in c_reads[y]:
${finish_row(y, owned[y][o], f'cin{o}')}\
% endif
% endfor
</%def>
## One code for every warp: the loads named (C's old values into
## name<o>, B's rows into ld<s>), the row a warp loads selected by its
## index.
<%def name="c_load_all(run, name)">\
% for o in run:
        ${name}${o} = ${self.load_c(wave_select(c_positions[o]), 'col', 1)};
% endfor
</%def>
<%def name="load_all()">\
    if (col < n)
    {
% if preload_c:
${c_load_all(range(nown), 'own')}\
% elif c_joins:
${c_load_all(cruns[0], 'cin')}\
% endif
% for s, rows in enumerate(stage_rows):
        ld${s} = ${self.load_b(wave_select(rows), 'col', 1)};
% endfor
        ${self.wait_loads()};
    }
</%def>
${self.prologue()}\
    const int col = blockIdx.x*blockDim.x + threadIdx.x;
    __shared__ ${dtype} red[${ks - 1}][${m}][${block[0]}];
    ${dtype} ${', '.join(f'own{o}' for o in range(nown))};
% if batched:
    ${dtype} ${', '.join(f'ld{s}' for s in range(len(stage_rows)))};
% if cruns:
    ${dtype} ${', '.join(f'cin{o}' for run in cruns for o in run)};
% endif
    const int wave = ${self.wave_uniform('threadIdx.y')};

    // This warp's B rows${' and old values of C' if preload_c or c_joins else ''}
${load_all()}\
% endif

    // Partial sums over this warp's columns of A
${per_wave(partials)}\
    __syncthreads();

    // Owners add the other warps' partials and store
% if cruns:
% for run in cruns:
% if not c_joins:
    if (col < n)
    {
${c_load_all(run, 'cin')}\
        ${self.wait_loads()};
    }
% endif
${per_wave(lambda y: finish_run(run, y))}\
% endfor
% else:
${per_wave(finish_rows)}\
% endif
}
