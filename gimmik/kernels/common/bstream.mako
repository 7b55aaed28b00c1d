<%inherit file="base.mako"/>
## bstream: one thread per column (two with width 2); the used rows of B are
## walked once, each updating every row of C it touches in registers.
<%def name="columns(w)">\
        ${self.vt(w)} ${', '.join(f'acc{i}' for i in range(m) if i not in zero_rows)};
% for cp in plan:
        {
            const ${self.vt(w)} bv = ${self.load_b(cp.j, 'col', w)};
% for i, v, first in cp.terms:
            acc${i} ${'=' if first else '+='} ${lit(v)}*bv;
% endfor
        }
% endfor
% for i in range(m):
${self.finish(i, 'col', w, None if i in zero_rows else f'acc{i}')}\
% endfor
</%def>
${self.prologue()}\
${self.per_column()}\
}
