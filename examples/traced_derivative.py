"""Two libraries in one launch: forward-mode differentiation (examples/forwarddiff.py) traced by the tracing
context (examples/tracing.py), neither knowing the other.

The kernel computes ``f'(x)`` of an unchanged ``f`` through Dual numbers, and the launch in the context
``tracing`` counts and times, per callee, the calls that differentiation makes: ``math.sin`` is called twice
per element (its Dual method, and the float sine inside that method), ``math.cos`` once though ``f`` never calls
it (the Dual sine's derivative). forwarddiff is a library of methods, not a context -- its methods apply in
every launch -- so the launch needs only ``context=tracing``; a library that is a context would be stacked
with it, ``context=(other, tracing)`` (docs/contexts.md).

Runs on the GPU when one is usable (cupy arrays), else on the CPU target (numpy arrays).
"""

import math

import numpy as np
from numba import cuda

import overdub as od
from forwarddiff import derivative
from tracing import table, trace, traced

__all__ = ["f", "traced_derivative"]


def f(x):  # written for floats
    return math.sin(x) * math.exp(x) + x**2


def kernel(out, xs):
    i = cuda.grid(1)
    if i < xs.size:
        out[i] = derivative(f, xs[i])


def traced_derivative(xs, target: str | None = None, threads: int = 256):
    """``f'(xs)`` and the report of its launch in the tracing context."""
    trace(derivative, f, math.sin, math.cos, math.exp)
    out = xs * 0
    blocks = (xs.size + threads - 1) // threads
    found = traced(kernel, out, xs, blocks=blocks, threads=threads, target=target)
    return out, found


if __name__ == "__main__":
    xp = np
    if od.default_target() == "cuda":
        import cupy as xp
    xs = xp.linspace(-2, 2, 1000)
    out, found = traced_derivative(xs)
    expected = (xp.cos(xs) + xp.sin(xs)) * xp.exp(xs) + 2 * xs
    print(f"f'(x) at {xs.size} points, largest error {float(abs(out - expected).max()):.1e}")
    print(table(found))
