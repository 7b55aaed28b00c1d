<%inherit file="base.mako"/>
## cstream-ksplit: the used columns of A are split across the block's
## blockDim.y warps (wavefronts on AMD; plan.kcols); each sums its share of
## every row of C, hands the partial sums of rows it does not own to their
## owner through shared memory (LDS),
## and each owner finishes its rows.
## crows (where C's old values are read in the finish): per warp, runs of
## its rows whose old values are loaded together before their stores.
<%
    ks = block[1]
    owned = [[i for i in range(m) if plan.owner[i] == y] for y in range(ks)]
    nown = max(len(o) for o in owned)
    # which warps hand a partial of row i over
    givers = [[y for y in range(ks) if plan.slot[y][i] is not None and plan.terms[y][i]] for i in range(m)]
%>
<%def name="per_wave(body)">\
    switch (${self.wave_uniform('threadIdx.y')})
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
% if preload_c:
            own${owned[y].index(i)} = ${'' if beta == 1 else betalit + '*'}${self.load_c(i, 'col', 1)};
% endif
% endfor
% for j in plan.loads[y]:
            const ${dtype} b${j} = ${self.load_b(j, 'col', 1)};
% endfor
% for i in range(m):
<%
    expr = ' + '.join(f'{lit(v)}*b{j}' for j, v in plan.terms[y][i])
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
% if crows is not None:
% for run in crows[y]:
% for i in run:
            const ${dtype} cin${i} = ${self.load_c(i, 'col', 1)};
% endfor
% for i in run:
${finish_row(y, i, f'cin{i}')}\
% endfor
% endfor
% else:
% for i in owned[y]:
${finish_row(y, i)}\
% endfor
% endif
</%def>
${self.prologue()}\
    const int col = blockIdx.x*blockDim.x + threadIdx.x;
    __shared__ ${dtype} red[${ks - 1}][${m}][${block[0]}];
    ${dtype} ${', '.join(f'own{o}' for o in range(nown))};

    // Partial sums over this warp's columns of A
${per_wave(partials)}\
    __syncthreads();

    // Owners add the other warps' partials and store
${per_wave(finish_rows)}\
}
