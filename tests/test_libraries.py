"""The libraries built on overdub as a user would build them (examples/forwarddiff.py, examples/checking.py,
examples/tracing.py): forward-mode differentiation of an unchanged function through Dual numbers, a context
that bounds-checks every array access and counts calls on the device, and a tracing context counting and
timing calls per callee -- composed with differentiation in one launch (examples/traced_derivative.py). On the
CPU target here; the CUDA side compiles to PTX, and runs in the ``gpu`` tests."""

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
import tracing
from checking import profile, run_checked
from forwarddiff import Dual, derivative
from traced_derivative import traced_derivative
from tracing import trace, traced, traced_call


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


# --- the tracing context -------------------------------------------------------------------------------


@od.function
def step(x: od.Float):
    return math.exp(-x * x) + math.sin(x)


def steps(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        out[i] = step(xs[i]) + math.sin(1.0)


def tripled(x):
    return x * 3.0


def triples(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        out[i] = tripled(xs[i])


def _counts(found):
    return {name: c.calls for name, c in found.items()}


def test_the_tracing_context_counts_and_times_each_traced_callee_in_a_kernel():
    trace(step, math.exp, math.sin)
    xs, out = np.linspace(0, 1, 100), np.zeros(100)
    found = traced(steps, out, xs, blocks=2, threads=64, target="cpu")
    assert _counts(found) == {"step": 100, "exp": 100, "sin": 200}  # threads 100-127 fail the guard
    np.testing.assert_allclose(out, np.exp(-xs * xs) + np.sin(xs) + math.sin(1.0), rtol=1e-15)
    # inclusive times: each call of step encloses its call of exp, and the monotonic clock never goes back;
    # 100 calls take well under a second
    assert 0 < found["exp"].seconds < found["step"].seconds < 1


def test_a_host_function_is_traced_on_the_host():
    def integrate(xs):
        total = 0.0
        for i in range(xs.size):
            total += step(xs[i])
        return total

    trace(step, math.exp, math.sin, integrate)
    xs = np.linspace(0, 1, 50)
    total, found = traced_call(integrate, xs)  # od.overdub(tracing, ..., state=...)
    assert _counts(found) == {"integrate": 1, "step": 50, "exp": 50, "sin": 50}
    assert total == pytest.approx(float(np.sum(np.exp(-xs * xs) + np.sin(xs))), rel=1e-14)
    assert 0 < found["step"].seconds < found["integrate"].seconds < 1


def _ptx_instructions(ptx: str) -> list[str]:
    lines = (line.strip() for line in ptx.splitlines() if line.startswith("\t"))
    return sorted(line.split()[0] for line in lines if line and not line.startswith((".", "//")))


def test_calls_not_traced_get_no_hook_code_in_the_tracing_context():
    argtypes, state = (numba_types.float64[::1],) * 2, numba_types.int64[::1]
    hookless = od.Context("hookless", state=od.Array[od.int64, 1])
    cpu = od.code_llvm(triples, *argtypes, context=tracing.tracing, state=state, target="cpu")
    assert "clock_gettime" not in cpu and "atomicrmw" not in cpu
    bare_ptx = od.code_ptx(triples, *argtypes, context=hookless, state=state)
    assert _ptx_instructions(od.code_ptx(triples, *argtypes, context=tracing.tracing, state=state)) == (
        _ptx_instructions(bare_ptx)
    )
    trace(tripled)
    cpu = od.code_llvm(triples, *argtypes, context=tracing.tracing, state=state, target="cpu")
    assert cpu.count("clock_gettime") >= 2 and "atomicrmw add" in cpu
    ptx = od.code_ptx(triples, *argtypes, context=tracing.tracing, state=state)
    assert ptx.count("%globaltimer") == 2 and "atom.global.add" in ptx  # a clock read before the call, one after
    assert _counts(traced(triples, np.zeros(4), np.ones(4), threads=4, target="cpu")) == {"tripled": 4}


def test_the_tracing_hooks_turned_off_and_on_again():
    trace(step)
    xs, out = np.linspace(0, 1, 8), np.zeros(8)
    tracing.tracing.disablehooks()
    try:
        assert traced(steps, out, xs, threads=8, target="cpu") == {}
    finally:
        tracing.tracing.enablehooks()
    assert _counts(traced(steps, out, xs, threads=8, target="cpu"))["step"] == 8


def test_a_context_stacked_with_tracing_overdubs_the_calls_tracing_observes_or_those_it_makes():
    cheap = od.Context("cheap_exp")

    @cheap.overdub(math.exp)
    def _(x: od.Float):
        return 1.0 + x + x * x / 2.0 + math.sin(0.0)  # a call of its own: one context down

    trace(math.exp, math.sin)
    xs = np.linspace(0, 0.1, 8)

    def run(*contexts):
        out, state = np.zeros(8), tracing.counters("cpu")
        od.cuda(steps, out, xs, threads=8, target="cpu", context=contexts, state=state)
        return out, _counts(tracing.report(state))

    out, counts = run(tracing.tracing, cheap)  # tracing first: it observes the kernel's calls of exp
    assert counts["exp"] == 8 and counts["sin"] == 16
    np.testing.assert_allclose(out, 1 - xs * xs + xs**4 / 2 + np.sin(xs) + math.sin(1.0), rtol=1e-15)
    out, counts = run(cheap, tracing.tracing)  # cheap first: tracing sees the calls its overdub makes instead
    assert "exp" not in counts and counts["sin"] == 8 + 8 + 8


def test_differentiation_and_tracing_in_one_launch():
    xs = np.linspace(-2, 2, 300)
    out, found = traced_derivative(xs, target="cpu", threads=128)
    np.testing.assert_allclose(out, f_prime(xs), rtol=1e-12, atol=1e-12)
    # math.sin twice an element: its Dual method, and the float sine inside it; math.cos from that method
    n = xs.size
    assert _counts(found) == {"derivative": n, "f": n, "sin": 2 * n, "cos": n, "exp": 2 * n}
    assert 1 > found["derivative"].seconds > found["f"].seconds > found["cos"].seconds > 0


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


@pytest.mark.gpu
def test_tracing_and_traced_differentiation_on_the_gpu(cupy):
    trace(step, math.exp, math.sin)
    found = traced(steps, cupy.zeros(100), cupy.linspace(0, 1, 100), blocks=2, threads=64, target="cuda")
    assert _counts(found) == {"step": 100, "exp": 100, "sin": 200}
    assert found["step"].seconds >= found["exp"].seconds >= 0
    xs = cupy.linspace(-2, 2, 1000)
    out, found = traced_derivative(xs, target="cuda")
    np.testing.assert_allclose(out.get(), f_prime(xs.get()), rtol=1e-12, atol=1e-12)
    assert _counts(found) == {"derivative": 1000, "f": 1000, "sin": 2000, "cos": 1000, "exp": 2000}


# --- composed: differentiation (methods, no context) inside the bounds-checking context, in one launch ---


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
