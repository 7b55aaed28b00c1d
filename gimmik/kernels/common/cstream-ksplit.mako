<%inherit file="base.mako"/>
<%!
    from gimmik.plans import wave_select
%>\
## cstream-ksplit: the used columns of A are split across the block's
## blockDim.y warps (wavefronts on AMD; plan.kcols); each sums its share of
## every row of C, hands the partial sums of rows it does not own to their
## owner through shared memory (LDS),
## and each owner finishes its rows.
## batched (Target.batch_loads): a warp's B values
## (ld<s>), preloaded C and C's old values are loaded by one code for every
## warp, the row selected by the warp's wave-uniform index (stage_rows,
## c_positions), and waited for once before the warps' cases use them.
## chunked (loads not batched): the rows in passes (plan.passes), each
## summed, exchanged through shared buffer p % 2 and finished before the
## next; a warp's B values (ld<s>, s its position in plan.loads[y]) are
## loaded where the warp first needs them (fetch).
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
            own${owned[y].index(i)} = ${self.beta_scaled(self.load_c(i, 'col', 1))};
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
## Pass p of a chunked kernel: warp y's B values loaded at their first
## use, its partial sums of the pass's rows (red buffer p % 2 for rows
## others own) ...
<%def name="pass_partials(p, y)">\
<%
    r0, r1 = plan.passes[p]
    bslot = {j: s for s, j in enumerate(plan.loads[y])}
%>\
% for i in range(r0, r1):
% for j in fetch[y][i]:
            ld${bslot[j]} = ${self.load_b(j, 'col', 1)};
% endfor
<%
    expr = ' + '.join(f'{lit(v)}*ld{bslot[j]}' for j, v in plan.terms[y][i])
%>\
% if not expr:
% elif plan.slot[y][i] is not None:
            red[${p % 2}][${plan.slot[y][i]}][${i - r0}][threadIdx.x] = ${expr};
% else:
            own${pass_owned[p][y].index(i)} = ${expr};
% endif
% endfor
</%def>
## ... and the rows of the pass it owns finished.
<%def name="pass_finish(p, y)">\
<%
    r0 = plan.passes[p][0]
%>\
% for o, i in enumerate(pass_owned[p][y]):
<%
    parts = ([f'own{o}'] if plan.terms[y][i] else []) + \
            [f'red[{p % 2}][{plan.slot[g][i]}][{i - r0}][threadIdx.x]' for g in givers[i]]
%>\
    ${self.finish(i, 'col', 1, ' + '.join(parts) or None)}\
% endfor
</%def>
${self.prologue()}\
    const int col = blockIdx.x*blockDim.x + threadIdx.x;
% if chunked:
<%
    nchunk = max(r1 - r0 for r0, r1 in plan.passes)
    npown = max(len(rows) for per_y in pass_owned for rows in per_y)
    nld = max(len(ld) for ld in plan.loads)
%>\
    __shared__ ${dtype} red[2][${ks - 1}][${nchunk}][${block[0]}];
    ${dtype} ${', '.join(f'own{o}' for o in range(npown))};
% if nld:
    ${dtype} ${', '.join(f'ld{s}' for s in range(nld))};
% endif
% for p, (r0, r1) in enumerate(plan.passes):

    // Rows ${r0} to ${r1 - 1}: partial sums over this warp's columns of A
${per_wave(lambda y: pass_partials(p, y))}\
    __syncthreads();

    // Owners add the other warps' partials and store
${per_wave(lambda y: pass_finish(p, y))}\
% endfor
}
% else:
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
% endif
