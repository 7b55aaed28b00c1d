"""mfma-dense (HIP, f64): A densified into 16x4 tiles baked in the fragment
order of v_mfma_f64_16x16x4f64 (gimmik.fragments.mfma)."""

from gimmik import cost
from gimmik.fragments import mfma, mfma_tiled
from gimmik.families import Family, Geometry

# Registers of an mfma-dense wavefront: 32 AGPRs an m-tile plus slack, arch
# VGPRs by path and beta (clang-19, bench/results/hip-mfma-isa.csv)
AGPR_SLACK = 8
ARCH_VGPRS = {'lds': 88, 'direct': 48}
ARCH_VGPRS_C_READ = 104


def vgprs(mtiles, params, c_read=False):
    """(arch VGPRs, AGPRs) of an mfma-dense candidate of an operator with
    `mtiles` 16-row tiles by that estimate (c_read: beta != 0)."""
    per = -(-mtiles // params['msplit'])
    arch = ARCH_VGPRS['lds' if params['msplit'] > 1 else 'direct']
    if c_read:
        arch = max(arch, ARCH_VGPRS_C_READ)
    acc = 8*mfma.N_TILES*per      # 4 doubles per N-tile, 2 VGPRs each
    return arch, acc + AGPR_SLACK


def waves(mtiles, params, c_read=False):
    """Waves per SIMD an mfma-dense candidate of an operator with `mtiles`
    16-row tiles reaches by that estimate."""
    return mfma_tiled.waves_per_simd(*vgprs(mtiles, params, c_read))


class MfmaDense(Family):
    name = 'mfma-dense'
    arch_specific = True
    # adapt holds a candidate to mfma_tiled.MIN_WAVES waves per SIMD by its
    # own VGPR estimate: no platform limit
    max_registers = {'hip': None}

    @classmethod
    def adapt(cls, mm, params):
        """msplit capped at the m-tiles (one wavefront is the direct path,
        without LDS parameters); None when a wavefront would hold too many
        accumulators or reach fewer than mfma_tiled.MIN_WAVES waves per
        SIMD."""
        p = dict(params)
        mtiles = -(-mm.info.m // mfma.MFMA_M)
        p['msplit'] = min(p['msplit'], mtiles)
        if p['msplit'] == 1:
            p = dict(msplit=1, pipe=min(p['pipe'], 1), vec=p['vec'])
        if -(-mtiles // p['msplit']) > mfma.MAX_MTILES_PER_WAVE:
            return None
        if waves(mtiles, p, mm.beta != 0) < mfma_tiled.MIN_WAVES:
            return None
        return p

    def geometry(self):
        # 64 lanes x 64 columns per wavefront, msplit wavefronts in y; LDS:
        # nbuf buffers of the largest chunk's rows x 64 columns
        p = self.params
        ms = p['msplit']
        shared = 0
        if ms > 1:
            kact = -(-len(self.info.bix) // mfma.MFMA_K)
            rows = mfma.MFMA_K*min(p['kchunk'], kact)
            shared = p['nbuf']*rows*mfma.WAVE*self.itemsize
        return Geometry((mfma.WAVE, ms, 1), shared, 1)

    def build_plan(self):
        p = self.params
        bake = self.mm.memo('mfma-bake', lambda: mfma.bake_mfma(self.A))
        return mfma.mfma_plan(bake, p['msplit'], p.get('kchunk', 1),
                              p['vec'], p.get('nbuf', 1), p['pipe'])

    def context(self):
        plan, g = self.plan, self.geometry()
        if plan.lds_bytes != g.shared or plan.msplit != g.block[1]:
            raise ValueError(f'mfma-dense {self.params}: the plan and the '
                             'launch geometry disagree')
        return {'plan': plan, 'vec': self.params['vec'],
                'pipe': self.params['pipe']}

    def registers(self):
        mtiles = -(-self.info.m // mfma.MFMA_M)
        return sum(vgprs(mtiles, self.params, self.mm.beta != 0))

    def work(self):
        P, size, info = self.plan, self.itemsize, self.info
        g = self.geometry()
        c_rw = info.m*size*(2 if self.mm.beta else 1)
        b = len(info.bix)*size
        # every wave runs the same slots: msplit waves x mfma_count a block
        # of WAVE columns
        mflops = (P.msplit*P.mfma_count*2*mfma.MFMA_M*mfma.MFMA_N
                  * mfma.MFMA_K / mfma.WAVE)
        lds = b*(1 + P.msplit) if P.lds else 0.0
        stage = (P.nbuf*P.chunk_rows*mfma.WAVE*size / (mfma.WAVE*P.msplit)
                 if P.lds else b)
        instr = P.msplit*P.mfma_count / mfma.WAVE + (info.m + b / size) / 64
        waits = len(P.chunks) if P.lds else 1
        return cost.Work(b + c_rw, b + c_rw, lds, 0.0, mflops, instr, stage,
                         g.block[0]*g.block[1], mfma.WAVE, 1, True, waits)
