<%inherit file="base.mako"/>
## bstream: one thread per column (two with width 2); the used rows of B are
## walked once, each updating every row of C it touches in registers; where
## the family gives runs (bruns, cruns: HIP), B's rows and C's old values
## are loaded a run at a time before they are consumed, each run's loads
## fenced off from what follows them (sched_fence).
<%def name="columns(w)">\
        ${self.vt(w)} ${', '.join(f'acc{i}' for i in range(m) if i not in zero_rows)};
% if bruns is None:
% for cp in plan:
        {
            const ${self.vt(w)} bv = ${self.load_b(cp.j, 'col', w)};
% for i, v, first in cp.terms:
            acc${i} ${'=' if first else '+='} ${lit(v)}*bv;
% endfor
        }
% endfor
% else:
## a run of B rows loaded together, then their updates
% for run in bruns:
        {
% for r, cp in enumerate(run):
            const ${self.vt(w)} bv${r} = ${self.load_b(cp.j, 'col', w)};
% endfor
${self.sched_fence()}\
% for r, cp in enumerate(run):
% for i, v, first in cp.terms:
            acc${i} ${'=' if first else '+='} ${lit(v)}*bv${r};
% endfor
% endfor
        }
% endfor
% endif
% if cruns is None:
% for i in range(m):
${self.finish(i, 'col', w, None if i in zero_rows else f'acc{i}')}\
% endfor
% else:
## the old values of a run of rows of C loaded together, then the rows
% for rows, crows in cruns:
% for i in crows:
        const ${self.vt(w)} cin${i} = ${self.load_c(i, 'col', w)};
% endfor
${self.sched_fence()}\
% for i in rows:
${self.finish(i, 'col', w, None if i in zero_rows else f'acc{i}', f'cin{i}' if i in crows else None)}\
% endfor
% endfor
% endif
</%def>
${self.prologue()}\
${self.per_column()}\
}
