"""gimmik.plans' load batches (the unrolled cstream families on HIP with
beta != 0): batches cover every row and every B row once, each issues at
least min_loads loads before its rows consume them, a short last batch
joins the one before; the register estimate follows the batches and is
cstream's at one row a batch.  load_runs (bstream's runs on HIP): runs
cover the items in order, each of at least min_loads loads.  msplit_plan's
load batches (bstream-msplit on HIP): consecutive chunks, each batch of at
least min_loads loads a wavefront, its chunks' staging registers numbered
in turn (wavefront 0 loads the most) and the same in every wavefront.
The one-code-for-every-wave loads: wave_select's expression is each
wave's value, wave_positions give each wave its rows (padded with its
last), wave_runs cover every position read in runs of min_loads, and
msplit_stage_rows are the rows each wave stages."""

import numpy as np
import pytest

from conftest import group_operator
from gimmik.plans import (batched_live_values, cstream_live_b, cstream_plan,
                          load_batches, load_runs, msplit_plan,
                          msplit_stage_rows, reads_c, reads_c_value,
                          row_batches_wait_often, wave_positions, wave_runs,
                          wave_select)


def batch_loads(batch):
    return len(batch.loads) + len(batch.crows)


@pytest.mark.parametrize('beta', [0.0, 1.0, -0.5])
@pytest.mark.parametrize('min_loads', [1, 4, 8, 100])
def test_batches_cover_rows_and_loads_once(rng, beta, min_loads):
    A = group_operator(rng)
    plan = cstream_plan(A)
    batches = load_batches(plan, beta, min_loads)
    assert [r.i for b in batches for r in b.rows] == list(range(A.shape[0]))
    loads = [j for b in batches for j in b.loads]
    assert sorted(loads) == sorted(set(loads))
    assert set(loads) == set(np.flatnonzero((A != 0).any(axis=0)))
    for b in batches:
        # a B row is loaded in the batch of the first row that needs it
        assert set(b.loads) == {j for r in b.rows for j in r.loads}
        assert b.crows == [r.i for r in b.rows if reads_c(r, beta)]
    # every batch but a lone one issues at least min_loads loads
    if len(batches) > 1:
        assert all(batch_loads(b) >= min_loads for b in batches)


def test_reads_c():
    plan = cstream_plan(np.array([[1.0, 0.0], [0.0, 0.0]]))
    assert [reads_c(r, 0.0) for r in plan] == [False, False]
    assert [reads_c(r, 1.0) for r in plan] == [True, False]
    assert [reads_c(r, -0.5) for r in plan] == [True, True]
    assert [reads_c_value(t, 1.0) for t in (True, False)] == [True, False]
    assert not reads_c_value(True, 0.0)


def test_batch_sizes_on_a_diagonal():
    """Each row of a diagonal A loads one B row and, with beta != 0, its C
    value: batches of 4 rows at 8 loads, the short remainder joined."""
    A = np.diag(np.arange(1.0, 11.0))
    sizes = [len(b.rows) for b in load_batches(cstream_plan(A), 1.0, 8)]
    assert sizes == [4, 6]
    sizes = [len(b.rows) for b in load_batches(cstream_plan(A), 0.0, 8)]
    assert sizes == [10]
    assert [len(b.rows) for b in load_batches(cstream_plan(A), 1.0, None)] \
        == [1]*10


def test_row_batches_wait_often():
    """One row a batch waits once per row that loads B: on a diagonal A
    (one load a row) more than once per 8 loads, on a dense A (the first
    row loads every B row) once."""
    diag = cstream_plan(np.diag(np.arange(1.0, 11.0)))
    assert row_batches_wait_often(diag, 8)
    assert not row_batches_wait_often(diag, 1)
    dense = cstream_plan(np.arange(1.0, 41.0).reshape(4, 10))
    assert not row_batches_wait_often(dense, 8)
    # two loading rows of 16 loads in all: once per 8 loads allowed
    two = np.zeros((3, 16))
    two[0, :8] = two[2, 8:] = 1.0
    assert not row_batches_wait_often(cstream_plan(two), 8)
    assert row_batches_wait_often(cstream_plan(two), 9)


def test_one_row_a_batch_is_the_cstream_estimate(rng):
    A = group_operator(rng)
    plan = cstream_plan(A)
    batches = load_batches(plan, 1.0, None)
    assert all(not b.crows for b in batches)
    assert batched_live_values(batches) == cstream_live_b(plan)


def test_batched_estimate_counts_b_and_c():
    """Rows 0-1 share B rows 0-1 and row 2 uses B row 2: at 8 loads one
    batch holds the three B rows and three C values; with beta 0 and one
    row a batch at most two B rows are held, at 2 loads (row 2's short
    batch joins the one of rows 0-1) three."""
    A = np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [0.0, 0.0, 5.0]])
    batches = load_batches(cstream_plan(A), 1.0, 8)
    assert len(batches) == 1
    assert batched_live_values(batches) == 6
    assert batched_live_values(load_batches(cstream_plan(A), 0.0, None)) == 2
    assert batched_live_values(load_batches(cstream_plan(A), 0.0, 2)) == 3


@pytest.mark.parametrize('loads,min_loads,runs', [
    ([1]*20, 8, [(0, 8), (8, 20)]),
    ([1]*16, 8, [(0, 8), (8, 16)]),
    ([1]*5, 8, [(0, 5)]),
    ([0, 3, 0, 6, 1, 3, 0], 4, [(0, 4), (4, 7)]),
    ([0, 3, 0, 6, 1, 1, 0], 4, [(0, 7)]),
    ([], 8, []),
])
def test_load_runs(loads, min_loads, runs):
    assert load_runs(loads, min_loads) == runs


def test_load_runs_cover_and_reach_min(rng):
    loads = list(rng.integers(0, 3, size=50))
    runs = load_runs(loads, 8)
    assert runs[0][0] == 0 and runs[-1][1] == 50
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
    assert all(sum(loads[a:b]) >= 8 for a, b in runs)


# -- bstream-msplit's load batches --------------------------------------------

def wave_loads(plan, batch, y):
    return sum(len(plan.loads[q][y]) for q in batch)


@pytest.mark.parametrize('msplit,bsz', [(4, 16), (2, 16), (2, 8), (3, 16),
                                        (4, 3)])
@pytest.mark.parametrize('min_loads', [1, 8, 16])
def test_msplit_batches_cover_chunks_and_stage_in_turn(rng, msplit, bsz,
                                                       min_loads):
    A = group_operator(rng)
    plan = msplit_plan(A, msplit, bsz, min_loads=min_loads)
    ms = len(plan.groups)
    assert [q for b in plan.batches for q in b] == list(range(len(
        plan.chunks)))
    for b in plan.batches:
        assert plan.batch_at(b[0]) == b
        assert all(plan.batch_at(q) is None for q in b[1:])
        # every batch but a lone one issues at least min_loads loads in
        # some wavefront (the fullest: wave 0)
        if len(plan.batches) > 1:
            assert wave_loads(plan, b, 0) >= min_loads
        slots = [s for q in b for s in plan.slots[q][0]]
        assert slots == list(range(wave_loads(plan, b, 0)))
        # the s-th load of a chunk goes to the same register in every
        # wavefront that has one (the LDS writes are one code for all)
        for q in b:
            for y in range(ms):
                n = len(plan.slots[q][y])
                assert plan.slots[q][y] == plan.slots[q][0][:n]
    assert plan.nstage == max(wave_loads(plan, b, 0) for b in plan.batches)


def test_msplit_one_chunk_a_batch_without_min_loads(rng):
    A = group_operator(rng)
    plan = msplit_plan(A, 4, 16)
    assert plan.batches == [[q] for q in range(len(plan.chunks))]
    assert all(plan.slots[q][y] == list(range(len(plan.loads[q][y])))
               for q in range(len(plan.chunks)) for y in range(4))
    assert plan.nstage == max(len(ld) for per_q in plan.loads
                              for ld in per_q)


def test_msplit_batch_sizes():
    """38 used B rows in chunks of 16, 16 and 6 over 4 wavefronts load 4,
    4 and 2 (or 1) rows a wavefront: at 8 loads a batch, two chunks and
    the short last one joined (10 staging registers); at 4, one chunk a
    batch and the last joined."""
    A = np.ones((8, 38))
    plan = msplit_plan(A, 4, 16, min_loads=8)
    assert plan.batches == [[0, 1, 2]]
    assert plan.nstage == 10
    assert plan.slots[2] == [[8, 9], [8, 9], [8], [8]]
    plan = msplit_plan(A, 4, 16, min_loads=4)
    assert plan.batches == [[0], [1, 2]]
    assert plan.nstage == 6


# -- loads by one code for every wave -----------------------------------------

def c_value(expr, wave):
    """The value of a wave_select expression (C's ?: chain as Python's)."""
    import re
    py = re.sub(r'(\w+ == -?\d+) \? (-?\d+) :', r'\2 if \1 else', expr)
    return eval(py, {'wave': wave})


@pytest.mark.parametrize('values', [[3], [5, 5, 5], [0, 4, 8, 12],
                                    [7, 6], [2, 9, 4], [1, 1, 2, 3]])
def test_wave_select_is_each_waves_value(values):
    expr = wave_select(values)
    assert [c_value(expr, y) for y in range(len(values))] == values
    # scalar: no select where the values are equal or step evenly
    steps = {b - a for a, b in zip(values, values[1:])}
    assert ('?' in expr) == (len(steps) > 1)


def test_wave_positions_pad_with_the_last_row():
    rows = [[4, 5, 6], [7], [], [8, 9]]
    pos = wave_positions(rows, 3, fill=1)
    for y, r in enumerate(rows):
        got = [pos[p][y] for p in range(3)]
        assert got[:len(r)] == r
        assert set(got[len(r):]) <= {r[-1] if r else 1}


@pytest.mark.parametrize('min_loads', [1, 3, 8])
def test_wave_runs_cover_what_any_wave_reads(rng, min_loads):
    reads = [sorted(rng.choice(12, size=rng.integers(0, 12),
                               replace=False).tolist()) for _ in range(4)]
    runs = wave_runs(reads, min_loads)
    flat = [p for run in runs for p in run]
    assert flat == sorted(set(sum(reads, [])))
    assert all(len(run) >= min_loads for run in runs[:-1])


@pytest.mark.parametrize('msplit,bsz', [(4, 16), (3, 16), (2, 8), (4, 3)])
def test_msplit_stage_rows_are_each_waves_loads(rng, msplit, bsz):
    A = group_operator(rng)
    plan = msplit_plan(A, msplit, bsz, min_loads=8)
    rows = msplit_stage_rows(plan)
    for q, ch in enumerate(plan.chunks):
        assert len(rows[q]) == len(plan.slots[q][0])
        for y in range(len(plan.groups)):
            got = [rows[q][s][y] for s in range(len(rows[q]))]
            n = len(plan.loads[q][y])
            assert got[:n] == plan.loads[q][y]
            # the rest: the chunk's last row, which its owner writes too
            assert set(got[n:]) <= {len(ch) - 1}
            assert len(ch) - 1 in sum(plan.loads[q], [])
