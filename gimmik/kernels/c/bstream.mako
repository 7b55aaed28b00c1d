<%inherit file="base.mako"/>
## bstream: the block's used rows of B are streamed once, each updating the
## accumulator rows of C it touches; then C is written in one pass.
<%
    live = [i for i in range(m) if i not in zero_rows]
    slot = {i: s for s, i in enumerate(live)}
%>\
        ${dtype} acc[${len(live)}][${width}] __attribute__((aligned(64)));
% for cp in plan:

        // B row ${cp.j}
        #pragma omp simd
        for (int col = c0; col < c1; col++)
        {
            const ${dtype} bv = ${self.load_b(cp.j, 'col')};
% for i, v, first in cp.terms:
            acc[${slot[i]}][col - c0] ${'=' if first else '+='} ${lit(v)}*bv;
% endfor
        }
% endfor

        #pragma omp simd
        for (int col = c0; col < c1; col++)
        {
% for i in range(m):
${self.finish(i, 'col', f'acc[{slot[i]}][col - c0]' if i in slot else None)}\
% endfor
        }
