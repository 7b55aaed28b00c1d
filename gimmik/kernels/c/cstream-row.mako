<%inherit file="base.mako"/>
## cstream-row: row by row of C, a simd loop over the block's columns for
## each; the block's rows of B stay in cache from one row to the next.
% for row in plan:
<%
    expr = ' + '.join(f'{lit(v)}*{self.load_b(j, "col")}' for j, v in row.terms)
%>\
% if expr or not (beta == 1):
        #pragma omp simd
        for (int col = c0; col < c1; col++)
${self.finish(row.i, 'col', expr or None)}\
% endif
% endfor
