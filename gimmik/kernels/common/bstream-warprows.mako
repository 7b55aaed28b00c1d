<%inherit file="base.mako"/>
## bstream-warprows: warp (wavefront) y owns the rows plan.rows[y] of C and
## runs its own unrolled body.  The used rows of B are fetched straight into
## a double-buffered shared chunk of bsz rows, every warp loading its share
## (plan.loads); the next chunk's loads are issued before the current chunk
## is consumed and a barrier ends each chunk but the last, at the same count in every
## warp's body.  With beta != 0 the old C values of the rows a chunk ends
## are loaded with that chunk's B (cin, from DRAM in a step: the barrier
## hides them, and none waits before the first sums); a row of C is stored
## where its last term is added, its old value added then.
<%def name="fetch(q, y)">\
% if beta != 0:
% for i in plan.ends[q][y]:
        ${dtype} cin${i} = ${self.zero(1)};
% endfor
% endif
% if plan.loads[q][y] or (beta != 0 and plan.ends[q][y]):
        if (col < n)
        {
% for r in plan.loads[q][y]:
            bsh[${q % 2}][${r}][threadIdx.x] = ${self.load_b(plan.chunks[q][r], 'col', 1)};
% endfor
% if beta != 0:
% for i in plan.ends[q][y]:
            cin${i} = ${self.load_c(i, 'col', 1)};
% endfor
% endif
        }
% endif
</%def>
<%def name="consume(q, y)">\
% for r, ups, done in plan.steps[q][y]:
        bv = bsh[${q % 2}][${r}][threadIdx.x];
% for i, v, first in ups:
% if not first:
        acc${i} += ${lit(v)}*bv;
% else:
        ${dtype} acc${i} = ${lit(v)}*bv;
% endif
% endfor
% if done:
        if (col < n)
        {
% for i in done:
    ${self.finish(i, 'col', 1, f'acc{i}', cold=f'cin{i}')}\
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
