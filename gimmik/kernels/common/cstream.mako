<%inherit file="base.mako"/>
## cstream: one thread per column (two with width 2); each row of C is
## computed in turn, loading each row of B the first time a row needs it
## (CUDA's ld 'reload': at every use, leaving reuse to the L1 cache).
<%def name="columns(w)">\
% if context.get('ld') == 'reload':
% for row in plan:
${self.finish(row.i, 'col', w, ' + '.join(f'{lit(v)}*{self.load_b(j, "col", w)}' for j, v in row.terms) or None)}\
% endfor
% else:
% for row in plan:
% for j in row.loads:
        const ${self.vt(w)} b${j} = ${self.load_b(j, 'col', w)};
% endfor
${self.finish(row.i, 'col', w, ' + '.join(f'{lit(v)}*b{j}' for j, v in row.terms) or None)}\
% endfor
% endif
</%def>
${self.prologue()}\
${self.per_column()}\
}
