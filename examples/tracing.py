"""A tracing context, as a library on top of overdub: per-callee call counts and time, on the host and in kernels.

:func:`trace` names the functions to trace. Each gets a *slot*, a method of the generic function ``_slot``
dispatching on the callee (``od.Callee[f]``), and a prehook and a posthook of every call (hooks of ``od.Any``,
which receive the callee first) that dispatch on ``od.Callee[f]`` too and add to the callee's counters in the
context's state, at its slot, with atomic adds::

    trace(step, math.exp)
    print(traced(kernel, out, xs, threads=256))   # {'step': Calls(calls=256, seconds=...), 'exp': ...}

The slot is a constant of the compile (dispatch happens while the kernel compiles), and a call of a callee
that is not traced matches no hook, so it compiles to what it would be in a context without hooks.

**Time.** A call's time is the clock after it less the clock before it. The prehook subtracts the clock from
the callee's time counter and the posthook adds it, so the counter sums ``after - before`` over every call
without a stack of start times (int64 arithmetic wraps, so the running sum may pass through any value). It is
inclusive (a callee's own callees count too), summed over threads (thread-seconds, not wall-clock time), and
includes the hooks' own cost (their atomic adds and clock reads). The clock is ``%globaltimer`` on the GPU
(nanoseconds) and ``clock_gettime(CLOCK_MONOTONIC)`` on the CPU target (nanoseconds): numba-cuda has no clock
function, so :func:`_clock` is a numba ``@intrinsic`` that emits either. (A kernel calling a numba intrinsic of
user code is compiled and not stored in overdub's disk cache, so traced launches compile in each process.)

**On the host.** :func:`traced_call` runs a host function with ``od.overdub(tracing, f, *args, state=...)``:
compiled by the CPU target in the context, the same hooks as in kernels.
"""

import time
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import cuda
from numba.core import cgutils, types
from numba.core.extending import intrinsic
from numba.cuda.target import CUDATargetContext

import overdub as od

__all__ = ["tracing", "trace", "traced", "traced_call", "counters", "report", "table", "Calls"]

tracing = od.Context("tracing", state=od.Array[od.int64, 1])  # [calls, nanoseconds] of each slot


class Calls(NamedTuple):
    calls: int
    seconds: float


# --- the clock --------------------------------------------------------------------------------------------


@intrinsic
def _clock(typingctx):
    """Nanoseconds: ``%globaltimer`` on the GPU, ``clock_gettime(CLOCK_MONOTONIC)`` on the CPU target."""

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        if isinstance(context, CUDATargetContext):
            timer = ir.InlineAsm(ir.FunctionType(i64, []), "mov.u64 $0, %globaltimer;", "=l", side_effect=True)
            return builder.call(timer, [])
        timespec = ir.LiteralStructType([i64, i64])  # tv_sec, tv_nsec: both 64-bit on 64-bit Linux and macOS
        gettime = ir.FunctionType(i32, [i32, timespec.as_pointer()])
        clock_gettime = cgutils.get_or_insert_function(builder.module, gettime, "clock_gettime")
        now = cgutils.alloca_once(builder, timespec)
        builder.call(clock_gettime, [ir.Constant(i32, time.CLOCK_MONOTONIC), now])
        seconds = builder.load(cgutils.gep_inbounds(builder, now, 0, 0))
        nanoseconds = builder.load(cgutils.gep_inbounds(builder, now, 0, 1))
        return builder.add(builder.mul(seconds, ir.Constant(i64, 1_000_000_000)), nanoseconds)

    return types.int64(), codegen


# --- slots: a traced callee's index, by dispatch on the callee --------------------------------------------


@od.function
def _slot(f: od.Callee):
    return -1  # not traced (never asked: only traced callees' calls are hooked)


_traced: dict = {}  # the callee's key -> (its slot, its name)


def _key(function):
    """A function of a module's top level by its module and name (as od.Callee knows it: it survives a
    redefinition), anything else by itself."""
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    return (module, qualname) if module and qualname and "<locals>" not in qualname else function


def trace(*functions) -> None:
    """Count the calls of ``functions`` (generic functions, plain functions, builtins such as ``math.sin``,
    ``cuda.grid``) and time them, in launches in :data:`tracing`."""
    for function in functions:
        key = _key(function)
        if key not in _traced:
            _traced[key] = (len(_traced), getattr(function, "__name__", repr(function)))
            _give_slot(function, _traced[key][0])


def _give_slot(function, index: int) -> None:
    """``_slot(f)`` is ``index`` for a call of ``function``, which a prehook and a posthook now observe."""

    # the annotations are evaluated when the defs run: this module has no `from __future__ import annotations`
    @od.method(_slot)
    def _(f: od.Callee[function]):
        return index

    @tracing.prehook(od.Any)
    def _(f: od.Callee[function], *args):
        _enter(f)

    @tracing.posthook(od.Any)
    def _(result, f: od.Callee[function], *args):
        _leave(f)


@od.function
def _enter(f):
    slot = _slot(f)  # a constant of the compile
    cuda.atomic.add(od.state(), 2 * slot, 1)
    cuda.atomic.add(od.state(), 2 * slot + 1, -_clock())


@od.function
def _leave(f):
    cuda.atomic.add(od.state(), 2 * _slot(f) + 1, _clock())


# --- launches and reports ---------------------------------------------------------------------------------


def counters(target: str | None = None):
    """Zeroed counters for every function traced so far (numpy on the CPU target, cupy on the GPU): the
    state of a launch in :data:`tracing`, made after the last :func:`trace` (the hooks index it by slot)."""
    size = max(2 * len(_traced), 2)
    if (target or od.default_target()) == "cuda":
        import cupy

        return cupy.zeros(size, dtype=np.int64)
    return np.zeros(size, dtype=np.int64)


def report(state) -> dict[str, Calls]:
    """The counters of a launch in :data:`tracing` (after it finished), by the name of each traced function
    that was called."""
    host = state.get() if hasattr(state, "get") else np.asarray(state)
    found = {}
    for slot, name in _traced.values():
        if 2 * slot + 1 < host.size and host[2 * slot]:
            found[name] = Calls(int(host[2 * slot]), int(host[2 * slot + 1]) * 1e-9)
    return found


def table(found: dict[str, Calls]) -> str:
    """A report as a table: name, calls, total time in microseconds."""
    rows = [f"{'callee':<12} {'calls':>8} {'time (us)':>12}"]
    rows += [f"{name:<12} {c.calls:>8} {c.seconds * 1e6:>12.1f}" for name, c in found.items()]
    return "\n".join(rows)


def traced(kernel, *args, target: str | None = None, **launch) -> dict[str, Calls]:
    """Launch ``kernel`` in :data:`tracing` and report its traced calls."""
    state = counters(target)
    od.cuda(kernel, *args, target=target, context=tracing, state=state, **launch)
    od.synchronize(target)
    return report(state)


def traced_call(f, *args) -> tuple[object, dict[str, Calls]]:
    """Call ``f(*args)`` on the host, compiled by the CPU target in :data:`tracing` (``od.overdub``): its value,
    and its traced calls (the call of ``f`` itself included where ``f`` is traced)."""
    state = counters("cpu")
    value = od.overdub(tracing, _caller(f, len(args)), *args, state=state)
    return value, report(state)


_callers: dict = {}  # (f, arity) -> a def calling f (so that the call of f itself is a call hooks observe)


def _caller(f, arity: int):
    caller = _callers.get((f, arity))
    if caller is None:
        names = ", ".join(f"a{i}" for i in range(arity))
        namespace = {"f": f}
        exec(f"def call({names}):\n    return f({names})\n", namespace)
        caller = _callers[(f, arity)] = namespace["call"]
    return caller


# --- a demonstration: python examples/tracing.py ----------------------------------------------------------

if __name__ == "__main__":
    import math

    @od.function
    def step(x: od.Float):
        return math.exp(-x * x) + math.sin(x)

    def integrate(xs):  # on the host: a loop
        total = 0.0
        for i in range(xs.size):
            total += step(xs[i])
        return total / xs.size

    def kernel(out, xs):  # in a kernel: a thread per element
        i = cuda.grid(1)
        if i < xs.size:
            out[i] = step(xs[i])

    trace(integrate, step, math.exp, math.sin, cuda.grid)
    mean, found = traced_call(integrate, np.linspace(0, 1, 1000))
    print(f"on the host (mean {mean:.6f}):", table(found), sep="\n")

    target = od.default_target()
    xp = np
    if target == "cuda":
        import cupy as xp
    xs, out = xp.linspace(0, 1, 1000), xp.zeros(1000)
    print(f"\nin a kernel ({target} target):", table(traced(kernel, out, xs, blocks=4, threads=256)), sep="\n")
