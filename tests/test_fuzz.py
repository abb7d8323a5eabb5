"""The differential kernel fuzzer (tests/fuzz_kernels.py): generated kernels agree on the CPU target with its
bounds guard, checked (``debug=True``), on CUDA where a GPU is, and with the plain-Python reference.

The default run checks a slice (16 kernels, in this process), CI's full run (``OVERDUB_FULL=1``) 64;
``OVERDUB_SLOW=1`` runs ``OVERDUB_FUZZ_N`` kernels (default 10^4) on the CPU target and ``pytest -m gpu
tests/test_fuzz.py`` ``OVERDUB_FUZZ_N`` kernels (default 1000) on both targets, each in
``OVERDUB_FUZZ_PROCESSES`` subprocesses (default: one a core) from seed ``OVERDUB_FUZZ_SEED``. A divergence
prints its seed and the shrunk kernel; reproduce it with ``python tests/fuzz_kernels.py SEED 8``
(docs/fuzzing.md).
"""

import json
import os

import numpy as np
import pytest

import fuzz_kernels as fz
from overdub.targets.cpu import runner


@pytest.fixture(autouse=True)
def no_disk_cache(fresh_runtime, monkeypatch):
    """Generated kernels are each compiled once: storing them would only cost time."""
    monkeypatch.setenv("OVERDUB_CACHE", "0")


def assert_no_divergence(seed: int, count: int, targets=("cpu",), shrink_seconds: float = 20) -> None:
    found = fz.fuzz(seed, count, targets=targets)
    if found:
        reports = [fz.shrink(found[0], targets, seconds=shrink_seconds).report()] if shrink_seconds else []
        reports += [d.report() for d in found[len(reports) : 3]]
        pytest.fail(
            f"{len(found)} divergences from seed {seed} ({count} kernels); the first shrunk:\n\n" + "\n\n".join(reports)
        )


def assert_run_has_no_divergence(seed: int, count: int, targets=("cpu",)) -> None:
    processes = int(os.environ.get("OVERDUB_FUZZ_PROCESSES", str(os.cpu_count() or 1)))
    summary = fz.run(seed, count, targets, processes=processes)
    assert summary.divergences == [], summary.line() + "\n\n" + "\n\n".join(summary.divergences[:5])


# --- the reference itself ---------------------------------------------------------------------------------------


def test_the_reference_saturates_float_to_int_as_cuda_does():
    assert [int(fz.saturate(v)) for v in (np.inf, 1e30, -np.inf, -1e30, np.nan, -2.9, 2.9)] == [
        fz.INT64_MAX,
        fz.INT64_MAX,
        fz.INT64_MIN,
        fz.INT64_MIN,
        fz.INT64_MIN,
        -2,
        2,
    ]


def test_the_same_seed_generates_the_same_kernels():
    assert [k.source() for k in fz.generate(7, 5)] == [k.source() for k in fz.generate(7, 5)]
    assert [k.source() for k in fz.generate(7, 5)] != [k.source() for k in fz.generate(8, 5)]


def test_the_reference_runs_threads_in_lock_step_at_a_barrier():
    kernel = fz.Kernel(
        "kref",
        [
            fz.St("t = cuda.threadIdx.x", "t = cuda.threadIdx.x", fixed=True),
            fz.St("sh = cuda.shared.array(64, np.int64)", "sh = cuda.shared.array(64, np.int64)", fixed=True),
            fz.St("sh[t] = t * 10", "sh[t] = t * I(10)"),
            fz.St("cuda.syncthreads()", "yield"),
            fz.St("out[t * 4] = sh[(t + 1) % 8]", "out[t * I(4)] = sh[(t + I(1)) % I(8)]"),
        ],
        (1,),
        (8,),
        0,
        0,
        False,
        8,
        "0",
    )
    out = fz.run_reference(kernel)["out"]
    assert out[::4].tolist() == [10, 20, 30, 40, 50, 60, 70, 0]


def test_a_run_checks_disjoint_seeds_of_a_batch_each_whatever_the_processes():
    assert fz.batches(40, 20) == [(40, 8), (41, 8), (42, 4)]
    work = fz.batches(40, 20)
    assert sorted(item for p in range(2) for item in work[p::2]) == work


def test_a_batch_record_names_its_seed_kernels_and_findings():
    records = []
    fz.run_batches([(3, 1)], emit=records.append)
    record = json.loads(records[0])
    assert (record["seed"], record["kernels"], record["divergences"]) == (3, 1, [])


def test_constant_operands_are_not_folded_into_integers_numba_cannot_type():
    big = fz.Ex("({} << 37)", "({} << I(37))", (fz.lit(2**31),), folds=True)
    assert big.od == "(np.int64(2147483648) << 37)"
    assert fz.Ex("({} << 3)", "({} << I(3))", (fz.leaf("v0"),), folds=True).od == "(v0 << 3)"


# --- the fuzzer ----------------------------------------------------------------------------------------------------

SLICE = [1000, 1001, *(pytest.param(seed, marks=pytest.mark.soak) for seed in range(1002, 1008))]
"""8 seeds x 8 kernels, 6 of them a soak (seed 1002 found signed overflow folded as poison:
tests/test_fuzz_found.py). A seed whose divergence is a known bug being fixed is marked xfail(strict=True) with
it."""


@pytest.mark.skipif(
    runner.SYMBOLS is None,
    reason="overdub.targets.cpu._cpugrid is not built: the grammar's barriers and raises need it",
)
@pytest.mark.parametrize("seed", SLICE)
def test_generated_kernels_agree_with_the_reference_guarded_and_checked(seed, request):
    known = request.node.get_closest_marker("xfail") is not None  # shrunk already, in tests/test_fuzz_found.py
    assert_no_divergence(seed, 8, shrink_seconds=0 if known else 20)


@pytest.mark.skipif(runner.SYMBOLS is None, reason="overdub.targets.cpu._cpugrid is not built: barriers need it")
@pytest.mark.slow
def test_ten_thousand_generated_kernels_agree_on_the_cpu_target():
    assert_run_has_no_divergence(
        int(os.environ.get("OVERDUB_FUZZ_SEED", "1")), int(os.environ.get("OVERDUB_FUZZ_N", "10000"))
    )


@pytest.mark.skipif(runner.SYMBOLS is None, reason="overdub.targets.cpu._cpugrid is not built: barriers need it")
@pytest.mark.gpu
def test_generated_kernels_agree_on_cuda_and_the_cpu_target(cupy):
    seed, n = int(os.environ.get("OVERDUB_FUZZ_SEED", "2")), int(os.environ.get("OVERDUB_FUZZ_N", "1000"))
    assert_run_has_no_divergence(seed, n, targets=("cpu", "cuda"))
