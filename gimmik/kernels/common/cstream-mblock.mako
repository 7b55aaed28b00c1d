<%inherit file="base.mako"/>
## cstream-mblock: the rows of A are split into len(groups) groups of
## similar work, one group per block; consecutive blocks take the groups of
## one column tile in turn, so the B rows that several groups need are read
## from DRAM once and from L2 after.  Within a group it is cstream: each row
## of C in turn, loading each B row the first time the group needs it.
<%def name="rows(g, w)">\
<%
    r0, plan = groups[g]
%>\
% for row in plan:
% for j in row.loads:
            const ${self.vt(w)} b${j} = ${self.load_b(j, 'col', w)};
% endfor
${self.finish(r0 + row.i, 'col', w, ' + '.join(f'{lit(v)}*b{j}' for j, v in row.terms) or None)}\
% endfor
</%def>
${self.prologue()}\
    const int group = blockIdx.x % ${len(groups)};
    const int col = ${width}*((blockIdx.x / ${len(groups)})*blockDim.x + threadIdx.x);
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
}
