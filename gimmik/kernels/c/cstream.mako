<%inherit file="base.mako"/>
## cstream: for each column of the block, every row of C in turn, loading
## each row of B the first time a row needs it.
        #pragma omp simd
        for (int col = c0; col < c1; col++)
        {
% for row in plan:
% for j in row.loads:
            const ${dtype} b${j} = ${self.load_b(j, 'col')};
% endfor
${self.finish(row.i, 'col', ' + '.join(f'{lit(v)}*b{j}' for j, v in row.terms) or None)}\
% endfor
        }
