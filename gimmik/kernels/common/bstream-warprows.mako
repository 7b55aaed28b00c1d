<%inherit file="base.mako"/>
## bstream-warprows: warp (wavefront) y owns the rows plan.rows[y] of C and
## runs its own unrolled body.  The used rows of B are fetched straight into
## a double-buffered shared chunk of bsz rows, every warp loading its share
## (plan.loads); the next chunk's loads are issued before the current chunk
## is consumed and a barrier ends each chunk but the last, at the same count in every
## warp's body.  A row of C is finished where its last term is added.
<%def name="fetch(q, y)">\
% if plan.loads[q][y]:
        if (col < n)
        {
% for r in plan.loads[q][y]:
            bsh[${q % 2}][${r}][threadIdx.x] = ${self.load_b(plan.chunks[q][r], 'col', 1)};
% endfor
        }
% endif
</%def>
<%def name="consume(q, y)">\
% for r, ups, done in plan.steps[q][y]:
        bv = bsh[${q % 2}][${r}][threadIdx.x];
% for i, v, first in ups:
        ${dtype + ' ' if first else ''}acc${i} ${'=' if first else '+='} ${lit(v)}*bv;
% endfor
% if done:
        if (col < n)
        {
% for i in done:
    ${self.finish(i, 'col', 1, f'acc{i}')}\
% endfor
        }
% endif
% endfor
</%def>
${self.prologue()}\
    const int col = blockIdx.x*blockDim.x + threadIdx.x;
    __shared__ ${dtype} bsh[2][${bsz}][${block[0]}];
% for y in range(len(plan.rows)):

    if (threadIdx.y == ${y})
    {
        ${dtype} bv;
${fetch(0, y)}\
        __syncthreads();
% for q in range(len(plan.chunks)):
% if q + 1 < len(plan.chunks):
${fetch(q + 1, y)}\
% endif
${consume(q, y)}\
% if q + 1 < len(plan.chunks):
        __syncthreads();
% endif
% endfor
% if plan.idle[y] and beta != 1:
        if (col < n)
        {
% for i in plan.idle[y]:
    ${self.finish(i, 'col', 1, None)}\
% endfor
        }
% endif
    }
% endfor
}
