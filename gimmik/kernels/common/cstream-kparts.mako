<%inherit file="base.mako"/>
## cstream-kparts (families/cstream_kparts.py): rowgroups[r] is the plan of
## row group r (blockIdx.x % len(rowgroups)); its parts run in turn, a barrier
## between them, each warp (threadIdx.y) its groups of the part: a group
## loads its B rows (fenced off from what follows: sched_fence), then
## computes its rows, whose partial sums cross parts in xs[slot].
<%def name="acc(row)" buffered="True">${' + '.join(f'{lit(v)}*b{j}' for j, v in row.terms)}</%def>
<%def name="first(row)" buffered="True">\
<%
    old = self.load_c(row.i, 'col', 1)
%>\
% if beta == 0:
${acc(row)}\
% elif beta == 1:
${acc(row)} + ${old}\
% else:
${acc(row)} + ${betalit}*${old}\
% endif
</%def>
<%def name="group(g)">\
            {
% for j in g.loads:
            const ${dtype} b${j} = ${self.load_b(j, 'col', 1)};
% endfor
${self.sched_fence()}\
% for row in g.rows:
% if row.role == 'only':
${self.finish(row.i, 'col', 1, acc(row))}\
% elif row.role == 'first':
            xs[${row.slot}][threadIdx.x] = ${first(row)};
% elif row.role == 'add':
            xs[${row.slot}][threadIdx.x] += ${acc(row)};
% else:
            ${self.store_c(row.i, 'col', 1, f'xs[{row.slot}][threadIdx.x] + ' + acc(row))};
% endif
% endfor
            }
</%def>
<%def name="rowgroup(blk)">\
% for p, part in enumerate(blk.parts):
% if p:
        __syncthreads();
% endif
        if (col < n)
        {
            switch (warp)
            {
% for w, groups in enumerate(part):
% if groups or (p == 0 and w == 0 and blk.zero_rows):
            case ${w}:
% for g in groups:
${group(g)}\
% endfor
% if p == 0 and w == 0:
% for i in blk.zero_rows:
${self.finish(i, 'col', 1, None)}\
% endfor
% endif
                break;
% endif
% endfor
            }
        }
% endfor
</%def>
${self.prologue()}\
${self.tiles_open()}\
    const int col = (${bid} / ${len(rowgroups)})*blockDim.x + threadIdx.x;
    const int warp = ${self.wave_uniform('threadIdx.y')};
% if slots:
    __shared__ ${dtype} xs[${slots}][${block[0]}];
% endif
% if len(rowgroups) == 1:
${rowgroup(rowgroups[0])}\
% else:
    switch (${bid} % ${len(rowgroups)})
    {
% for r, blk in enumerate(rowgroups):
    case ${r}:
    {
${rowgroup(blk)}\
        break;
    }
% endfor
    }
% endif
${self.tiles_close()}\
}
