"""The two libraries built on overdub as a user would build them (examples/forwarddiff.py, examples/checking.py):
forward-mode differentiation of an unchanged function through Dual numbers, and a context that bounds-checks
every array access and counts calls on the device. On the CPU target here; the CUDA side compiles to PTX, and
runs in the ``gpu`` tests."""

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda
from numba import types as numba_types

import overdub as od

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import checking
from checking import profile, run_checked
from forwarddiff import Dual, derivative


def f(x):
    return math.sin(x) * math.exp(x) + x**2


def f_prime(x):
    return (np.cos(x) + np.sin(x)) * np.exp(x) + 2 * x


def by_dual(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        out[i] = derivative(f, xs[i])


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_an_unchanged_function_is_differentiated_in_a_kernel(dtype, tolerance):
    xs = np.linspace(-2, 2, 33).astype(dtype)
    out = np.zeros_like(xs)
    od.cuda(by_dual, out, xs, threads=64, target="cpu")
    assert out.dtype == dtype
    np.testing.assert_allclose(out, f_prime(xs.astype(np.float64)), rtol=tolerance, atol=tolerance)


def test_duals_follow_the_rules_of_arithmetic_comparison_and_math():
    def rules(out, x):
        d = Dual(x, 1.0)
        out[0] = (d * d / (d + 1.0) - 3.0 / d).partial  # quotient and product rules
        out[1] = math.sqrt(d).partial + math.log(d).partial + math.tanh(d).partial + math.atan(d).partial
        out[2] = (2.0**1 * d**3.0).partial + abs(-d).partial + (-d).partial
        out[3] = 1.0 if d < 3.0 and d > 1.0 and 1.0 < d else 0.0  # noqa: SIM300 -- the reflected comparison
        out[4] = (d**d).partial  # d/dx x^x = x^x (log x + 1)

    x = 2.0
    out = np.zeros(5)
    od.cuda(rules, out, x, target="cpu")
    expected = [
        (x * x + 2 * x) / (x + 1) ** 2 + 3 / x**2,
        0.5 / math.sqrt(x) + 1 / x + (1 - math.tanh(x) ** 2) + 1 / (1 + x * x),
        6 * x * x + 1 - 1,
        1.0,
        x**x * (math.log(x) + 1),
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_calls_with_floats_stay_float_operations_beside_dual_methods():
    def both(out, x):
        out[0] = math.sin(x) + x * x  # floats: the originals
        out[1] = derivative(math.sin, x)

    out = np.zeros(2)
    od.cuda(both, out, 0.5, target="cpu")
    assert out.tolist() == [math.sin(0.5) + 0.25, math.cos(0.5)]


def test_the_derivative_compiles_to_ptx_calling_nothing_but_libdevices_slow_path():
    ptx = od.code_ptx(by_dual, numba_types.float64[::1], numba_types.float64[::1])
    called = set(re.findall(r"call\.uni[^;]*?\n\s*(\S+),", ptx))
    assert called <= {"__internal_trig_reduction_slowpathd"}  # every Dual method inlined


# --- the checking and profiling context -----------------------------------------------------------------


def double(a, b):
    i = cuda.grid(1)
    b[i] = a[i] * 2  # no `if i < n`: the checked context catches the overrun


def test_the_checked_context_names_the_first_index_out_of_range_and_its_thread():
    a, b = np.arange(10.0), np.zeros(16)
    with pytest.raises(
        IndexError,
        match=r"index 10 is out of bounds for axis 0 with size 10, in thread "
        r"\(2, 0, 0\) of block \(1, 0, 0\) of kernel double",
    ):
        run_checked(double, a, b, blocks=2, threads=8, target="cpu")
    assert b[:10].tolist() == (a * 2).tolist()  # the accesses in range ran


def test_the_checked_context_checks_multidimensional_indices_and_stores():
    def fill(m):
        i, j = cuda.grid(2)
        m[i, j] = i + j

    with pytest.raises(IndexError, match=r"index 3 is out of bounds for axis 0 with size 3"):
        run_checked(fill, np.zeros((3, 4)), blocks=(1, 1), threads=(4, 4), target="cpu")
    m = np.zeros((4, 4))
    run_checked(fill, m, blocks=(1, 1), threads=(4, 4), target="cpu")
    assert m[3, 3] == 6


def test_a_kernel_in_range_runs_unchanged_in_the_checked_context():
    a, b = np.arange(10.0), np.zeros(10)
    run_checked(double, a, b, threads=10, target="cpu")
    assert b.tolist() == (a * 2).tolist()


@od.function
def square(x):
    return x * x


@od.function
def inc(x):
    return x + 1


def uses_both(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        out[i] = inc(square(xs[i])) + square(2.0)


def test_the_profiling_context_counts_calls_per_function_on_the_device():
    xs, out = np.arange(8.0), np.zeros(8)
    counts = profile(uses_both, out, xs, functions=[square, inc], threads=8, target="cpu")
    assert counts == {"square": 16, "inc": 8}
    assert out.tolist() == [x * x + 1 + 4 for x in range(8)]
    again = profile(uses_both, out, xs, functions=[square], blocks=2, threads=8, target="cpu")
    assert again == {"square": 16}  # threads 8-15 fail the guard: no calls


def test_the_checked_context_compiles_to_ptx_that_checks():
    array = numba_types.float64[::1]
    plain = od.code_ptx(double, array, array)
    checked = od.code_ptx(double, array, array, context=checking.checked, state=numba_types.int64[::1])
    assert "atom.global.cas" not in plain and "atom.global.cas" in checked  # the first error's record


# --- on the GPU -----------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_both_libraries_on_the_gpu(cupy):
    xs = cupy.linspace(-2, 2, 1000)
    out = cupy.zeros_like(xs)
    od.cuda(by_dual, out, xs, blocks=4, threads=256, target="cuda")
    np.testing.assert_allclose(out.get(), f_prime(xs.get()), rtol=1e-12, atol=1e-12)
    with pytest.raises(IndexError, match=r"index \d+ is out of bounds for axis 0 with size 10"):
        run_checked(double, cupy.arange(10.0), cupy.zeros(16), blocks=2, threads=8, target="cuda")
    counts = profile(uses_both, cupy.zeros(8), cupy.arange(8.0), functions=[square, inc], threads=8, target="cuda")
    assert counts == {"square": 16, "inc": 8}
