<%inherit file="base.mako"/>
## cstream-mblock: the rows of A are split into len(groups) groups, one
## group per block (families/cstream_mblock.py); consecutive blocks take the groups of
## one column tile in turn, so the B rows that several groups need are read
## from DRAM once and from L2 after.  Within a group it is cstream, batch
## by batch (families/cstream_mblock.py): a batch loads the B rows its rows
## are the first to need and the old values of its crows of C (fenced off
## from what follows them: sched_fence), then computes its rows of C in
## turn.  With stack > 1 a block runs `stack` groups (`sets` blocks a column
## tile), group threadIdx.y of its set on the block's columns.
<%def name="rows(g, w)">\
<%
    rows, batches = groups[g]
%>\
% for batch in batches:
% for j in batch.loads:
            const ${self.vt(w)} b${j} = ${self.load_b(j, 'col', w)};
% endfor
% for i in batch.crows:
            const ${self.vt(w)} cin${rows[i]} = ${self.load_c(rows[i], 'col', w)};
% endfor
${self.sched_fence()}\
% for row in batch.rows:
${self.finish(rows[row.i], 'col', w, ' + '.join(f'{lit(v)}*b{j}' for j, v in row.terms) or None, f'cin{rows[row.i]}' if row.i in batch.crows else None)}\
% endfor
% endfor
</%def>
${self.prologue()}\
${self.tiles_open()}\
% if stack == 1:
    const int group = ${bid} % ${len(groups)};
    const int col = ${width}*((${bid} / ${len(groups)})*blockDim.x + threadIdx.x);
% else:
    const int group = (${bid} % ${sets})*${stack} + ${self.wave_uniform('threadIdx.y')};
    const int col = ${width}*((${bid} / ${sets})*blockDim.x + threadIdx.x);
% endif
    switch (group)
    {
% for g in range(len(groups)):
    case ${g}:
    {
${self.guarded(lambda w: rows(g, w), width)}\
        break;
    }
% endfor
    }
${self.tiles_close()}\
}
