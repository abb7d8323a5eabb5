"""The differential kernel fuzzer (tests/fuzz_kernels.py): generated kernels agree on the CPU target with its
bounds guard, checked (``debug=True``), on CUDA where a GPU is, and with the plain-Python reference.

CI runs a slice; ``OVERDUB_SLOW=1`` runs ``OVERDUB_FUZZ_N`` kernels (default 10^4) on the CPU target;
``pytest -m gpu tests/test_fuzz.py`` runs ``OVERDUB_FUZZ_N`` kernels (default 1000) on both targets. A
divergence prints the seed and the shrunk kernel; reproduce it with ``python tests/fuzz_kernels.py SEED COUNT``.
"""

import os

import numpy as np
import pytest

import fuzz_kernels as fz


def assert_no_divergence(seed: int, count: int, targets=("cpu",), batch: int = 8) -> None:
    found = fz.fuzz(seed, count, batch=batch, targets=targets)
    if found:
        shrunk = [fz.shrink(d, targets, budget=120).report() for d in found[:3]]
        pytest.fail(
            f"{len(found)} divergences from seed {seed} ({count} kernels); first ones, shrunk:\n\n"
            + "\n\n".join(shrunk)
        )


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


# --- the fuzzer ----------------------------------------------------------------------------------------------------

SLICE = range(12)  # 12 seeds x 8 kernels


@pytest.mark.parametrize("seed", SLICE)
def test_generated_kernels_agree_with_the_reference_guarded_and_checked(seed):
    assert_no_divergence(1000 + seed, 8)


@pytest.mark.slow
def test_ten_thousand_generated_kernels_agree_on_the_cpu_target():
    n = int(os.environ.get("OVERDUB_FUZZ_N", "10000"))
    seed = int(os.environ.get("OVERDUB_FUZZ_SEED", "1"))
    assert_no_divergence(seed, n)


@pytest.mark.gpu
def test_generated_kernels_agree_on_cuda_and_the_cpu_target(cupy):
    n = int(os.environ.get("OVERDUB_FUZZ_N", "1000"))
    seed = int(os.environ.get("OVERDUB_FUZZ_SEED", "2"))
    assert_no_divergence(seed, n, targets=("cpu", "cuda"))
