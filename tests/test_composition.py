"""Libraries composed in one launch: forward-mode differentiation (examples/forwarddiff.py: methods on Dual
numbers, no context) inside the bounds-checking context (examples/checking.py): one launch gives both the
derivatives and the first index out of range, on both targets."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import overdub as od

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from checking import run_checked
from forwarddiff import derivative


def f(x):
    return math.sin(x) * math.exp(x) + x**2


def f_prime(x):
    return (np.cos(x) + np.sin(x)) * np.exp(x) + 2 * x


def derivatives_one_thread_too_many(out, xs):
    i = cuda.grid(1)  # no `if i < xs.size`: the last threads read and write past the end
    out[i] = derivative(f, xs[i])


def _both(xs, out, target):
    with pytest.raises(IndexError, match=r"index 10 is out of bounds for axis 0 with size 10, in thread \(2, 0, 0\)"):
        run_checked(derivatives_one_thread_too_many, out, xs, blocks=2, threads=8, target=target)


def test_derivatives_and_bounds_checking_in_one_launch_on_the_cpu():
    xs, out = np.linspace(0.0, 1.0, 10), np.zeros(10)
    _both(xs, out, "cpu")
    np.testing.assert_allclose(out, f_prime(xs), rtol=1e-12)


@pytest.mark.gpu
def test_derivatives_and_bounds_checking_in_one_launch_on_the_gpu(cupy):
    xs, out = cupy.linspace(0.0, 1.0, 10), cupy.zeros(10)
    _both(xs, out, "cuda")
    np.testing.assert_allclose(out.get(), f_prime(xs.get()), rtol=1e-12)
    assert od.stats()["compiles"] >= 1
