<%inherit file="base.mako"/>
## cstream: one thread per column (two with width 2); each row of C is
## computed in turn, loading each row of B the first time a row needs it
## (CUDA's ld 'reload': at every use, leaving reuse to the L1 cache), in
## load batches (gimmik.plans.load_batches): a batch's B loads and old C
## values, fenced off from what follows them (sched_fence), then its rows.
<%def name="columns(w)">\
% if context.get('ld') == 'reload':
% for row in plan:
${self.finish(row.i, 'col', w, ' + '.join(f'{lit(v)}*{self.load_b(j, "col", w)}' for j, v in row.terms) or None)}\
% endfor
% else:
% for batch in batches:
% for j in batch.loads:
        const ${self.vt(w)} b${j} = ${self.load_b(j, 'col', w)};
% endfor
% for i in batch.crows:
        const ${self.vt(w)} cin${i} = ${self.load_c(i, 'col', w)};
% endfor
${self.sched_fence()}\
% for row in batch.rows:
${self.finish(row.i, 'col', w, ' + '.join(f'{lit(v)}*b{j}' for j, v in row.terms) or None, f'cin{row.i}' if row.i in batch.crows else None)}\
% endfor
% endfor
% endif
</%def>
${self.prologue()}\
${self.per_column()}\
}
