"""Forward-mode automatic differentiation on the device, as a library on top of overdub.

A :class:`Dual` number carries a value and its derivative. Arithmetic, comparisons, ``abs``, ``**`` and the
``math`` functions get methods for it (``@od.method``), so an unchanged device function -- written for
floats, never told about derivatives -- computes its derivative when called with a Dual::

    def f(x):
        return math.sin(x) * math.exp(x) + x ** 2

    def kernel(out, xs):
        i = cuda.grid(1)
        if i < xs.size:
            out[i] = derivative(f, xs[i])      # f'(xs[i]), exact to rounding

Dispatch happens at compile time: a call with floats is the float operation, a call with Duals the Dual
method, inlined -- the kernel is what a hand-written derivative kernel would be. Julia's ForwardDiff.jl works
the same way (``Dual{T}`` and methods of ``+``, ``sin``, ...).
"""

from __future__ import annotations

import math
import operator
from typing import Generic, TypeVar

import overdub as od

__all__ = ["Dual", "derivative"]

T = TypeVar("T")


@od.struct
class Dual(Generic[T]):
    """A value and its derivative (``value + partial * ε`` with ``ε² = 0``)."""

    value: T
    partial: T


# --- arithmetic -------------------------------------------------------------------------------------------


@od.method(operator.add)
def _add(a: Dual, b: Dual):
    return Dual(a.value + b.value, a.partial + b.partial)


@od.method(operator.add)
def _add_number(a: Dual, b: od.Number):
    return Dual(a.value + b, a.partial)


@od.method(operator.add)
def _number_add(a: od.Number, b: Dual):
    return Dual(a + b.value, b.partial)


@od.method(operator.sub)
def _sub(a: Dual, b: Dual):
    return Dual(a.value - b.value, a.partial - b.partial)


@od.method(operator.sub)
def _sub_number(a: Dual, b: od.Number):
    return Dual(a.value - b, a.partial)


@od.method(operator.sub)
def _number_sub(a: od.Number, b: Dual):
    return Dual(a - b.value, -b.partial)


@od.method(operator.neg)
def _neg(a: Dual):
    return Dual(-a.value, -a.partial)


@od.method(operator.pos)
def _pos(a: Dual):
    return a


@od.method(operator.mul)
def _mul(a: Dual, b: Dual):
    return Dual(a.value * b.value, a.partial * b.value + a.value * b.partial)


@od.method(operator.mul)
def _mul_number(a: Dual, b: od.Number):
    return Dual(a.value * b, a.partial * b)


@od.method(operator.mul)
def _number_mul(a: od.Number, b: Dual):
    return Dual(a * b.value, a * b.partial)


@od.method(operator.truediv)
def _div(a: Dual, b: Dual):
    return Dual(a.value / b.value, (a.partial * b.value - a.value * b.partial) / (b.value * b.value))


@od.method(operator.truediv)
def _div_number(a: Dual, b: od.Number):
    return Dual(a.value / b, a.partial / b)


@od.method(operator.truediv)
def _number_div(a: od.Number, b: Dual):
    return Dual(a / b.value, -a * b.partial / (b.value * b.value))


@od.method(operator.pow)
def _pow_integer(a: Dual, n: od.Integer):
    # d(a^n) = n a^(n-1) da; a ** n of a float is the float power
    return Dual(a.value**n, n * a.value ** (n - 1) * a.partial)


@od.method(operator.pow)
def _pow_float(a: Dual, p: od.Float):
    return Dual(a.value**p, p * a.value ** (p - 1) * a.partial)


@od.method(operator.pow)
def _pow(a: Dual, b: Dual):
    # d(a^b) = a^b (b' log a + b a'/a)
    value = a.value**b.value
    return Dual(value, value * (b.partial * math.log(a.value) + b.value * a.partial / a.value))


@od.method(abs)
def _abs(a: Dual):
    return -a if a.value < 0 else a


# --- comparisons: on the values ---------------------------------------------------------------------------


@od.method(operator.lt)
def _lt(a: Dual, b: Dual):
    return a.value < b.value


@od.method(operator.le)
def _le(a: Dual, b: Dual):
    return a.value <= b.value


@od.method(operator.gt)
def _gt(a: Dual, b: Dual):
    return a.value > b.value


@od.method(operator.ge)
def _ge(a: Dual, b: Dual):
    return a.value >= b.value


@od.method(operator.lt)
def _lt_number(a: Dual, b: od.Number):
    return a.value < b


@od.method(operator.gt)
def _gt_number(a: Dual, b: od.Number):
    return a.value > b


@od.method(operator.lt)
def _number_lt(a: od.Number, b: Dual):
    return a < b.value


@od.method(operator.gt)
def _number_gt(a: od.Number, b: Dual):
    return a > b.value


# --- math functions: the chain rule -----------------------------------------------------------------------


@od.method(math.sin)
def _sin(x: Dual):
    return Dual(math.sin(x.value), math.cos(x.value) * x.partial)


@od.method(math.cos)
def _cos(x: Dual):
    return Dual(math.cos(x.value), -math.sin(x.value) * x.partial)


@od.method(math.tan)
def _tan(x: Dual):
    t = math.tan(x.value)
    return Dual(t, (1 + t * t) * x.partial)


@od.method(math.exp)
def _exp(x: Dual):
    e = math.exp(x.value)
    return Dual(e, e * x.partial)


@od.method(math.log)
def _log(x: Dual):
    return Dual(math.log(x.value), x.partial / x.value)


@od.method(math.sqrt)
def _sqrt(x: Dual):
    s = math.sqrt(x.value)
    return Dual(s, x.partial / (2 * s))


@od.method(math.tanh)
def _tanh(x: Dual):
    t = math.tanh(x.value)
    return Dual(t, (1 - t * t) * x.partial)


@od.method(math.atan)
def _atan(x: Dual):
    return Dual(math.atan(x.value), x.partial / (1 + x.value * x.value))


# --- the entry point --------------------------------------------------------------------------------------


@od.function
def derivative(f, x: od.float64):
    """``f'(x)``: ``f`` called with the Dual ``x + ε``, its partial."""
    return f(Dual(x, 1.0)).partial


@od.function
def derivative(f, x: od.float32):  # noqa: F811 -- a second method: Dual[float32] all the way
    return f(Dual(x, od.float32(1))).partial
