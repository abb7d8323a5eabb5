"""Cassette's ``overdub`` on the host: ``od.overdub(ctx, f, *args)`` calls ``f`` with ``args`` in the context
``ctx``, compiled -- by the CPU target, as a kernel's callees are -- and returns its value.

Everything a kernel gets, a host call gets: dispatch of generic functions at compile time, the context's
overdubs and hooks (then its parents', then ``od.CPU``'s), and edges, so a redefinition of anything the call
consulted makes the next call compile again. Compiled calls are kept per (function, argument types, chain).
A call whose arguments or body the compiler cannot take (a Python object without a numba type, say) is a
:class:`~overdub.job.CompileError` naming the function, the types and the line. The compiled call is a
:class:`HostCall`: the chain's target's dispatcher of the rewritten function, an :mod:`overdub.world` node kept
per job while every edge it consulted holds.
"""

from __future__ import annotations

import types as pytypes
import weakref
from collections.abc import Callable
from typing import Any

from . import compiler, world
from .bindings import Guarded
from .context import Context
from .job import CompileJob, chain_name
from .runtime import runtime
from .stacks import resolve
from .targets import get_target
from .targets.registry import HOST

__all__ = ["overdub", "HostCall", "host_call"]


def overdub(
    ctx: Context | tuple[Context, ...] | None, f: Callable[..., Any], *args: object, state: object = None
) -> Any:
    """Call ``f(*args)`` on the host in ``ctx`` (None: the CPU target's own context): compiled, with the
    context's overdubs and hooks, and the value ``f`` returns. A context that declares state takes its value
    as a launch does (``state=``): ``od.state()`` in its overdubs and hooks reads it."""
    target = get_target(HOST)
    context = resolve(ctx) or target.base
    func = _as_def(f, len(args))
    args += _defaults(func, len(args))
    hidden = () if state is None else (state,)  # the hidden first argument, as a launch passes it
    argtypes = tuple(_typed(target, func, i - len(hidden), a) for i, a in enumerate(hidden + args))
    chain = context.chain(target, context.launch_state_type(state, lambda value: argtypes[0]))
    node = host_call(CompileJob.of(func, argtypes, chain))
    return node.dispatcher(*hidden, *args)  # type: ignore[operator]  # the target's dispatcher


def _defaults(func: pytypes.FunctionType, given: int) -> tuple[object, ...]:
    """The default values of the parameters a call with ``given`` arguments leaves out, passed as arguments
    (the compiled function takes every parameter, as a kernel does)."""
    missing = func.__code__.co_argcount - given
    defaults = func.__defaults__ or ()
    return tuple(defaults[-missing:]) if 0 < missing <= len(defaults) else ()


def _typed(target: Any, func: pytypes.FunctionType, index: int, value: object) -> object:
    try:
        return target.argument(value).type
    except (TypeError, ValueError) as exc:
        where = "state" if index < 0 else f"argument {index}"
        raise TypeError(
            f"od.overdub(ctx, {func.__qualname__}, ...): {where} ({type(value).__name__} {value!r:.40}) "
            f"cannot be passed to compiled code ({exc}): pass numbers, numpy arrays, tuples of them or structs"
        ) from None


def _as_def(f: object, arity: int) -> pytypes.FunctionType:
    """The def to compile: ``f`` itself, a numba kernel's function, or a def calling ``f`` (a generic
    function, a builtin) with ``arity`` arguments."""
    if isinstance(f, pytypes.FunctionType):
        return f
    py_func = getattr(f, "py_func", None)
    if isinstance(py_func, pytypes.FunctionType):
        return py_func
    if not callable(f):
        raise TypeError(f"od.overdub(ctx, f, ...): f must be a function, not {type(f).__name__} {f!r:.60}")
    calls = _callers.get(f)
    if calls is None:
        calls = _callers[f] = {}
    caller = calls.get(arity)
    if caller is None:
        names = ", ".join(f"a{i}" for i in range(arity))
        namespace: dict[str, object] = {"callee": f}
        exec(f"def call({names}):\n    return callee({names})\n", namespace)
        made = namespace["call"]
        assert isinstance(made, pytypes.FunctionType)
        made.__qualname__ = f"overdub of {getattr(f, '__qualname__', f)!s}"
        caller = calls[arity] = made
    return caller


# a callable -> its arity -> the def calling it (a generic function's, a builtin's)
_callers: weakref.WeakKeyDictionary[object, dict[int, pytypes.FunctionType]] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._callers", _callers)


class HostCall(Guarded):
    """A function compiled for calls on the host in a context chain (``od.overdub``): a numba dispatcher of
    it rewritten in the chain, valid while every edge it consulted holds."""

    __slots__ = ("job", "dispatcher")

    def __init__(self, job: CompileJob) -> None:
        super().__init__()
        self.job = job
        self.dispatcher: object = None

    def on_invalidate(self, cause: str) -> None:
        _host_calls.pop(self.job, None)

    def describe(self) -> str:
        return f"host call {self.job.call()} in {chain_name(self.job.chain)}"


_host_calls: dict[CompileJob, HostCall] = {}
runtime.register_cache(f"{__name__}._host_calls", _host_calls)


def host_call(job: CompileJob) -> HostCall:
    """The compiled host call of ``job`` (the function rewritten in its chain, compiled by the chain's target
    with a Python entry point): reused while valid, else compiled again."""
    node = _host_calls.get(job)
    if node is not None and node.usable():
        return node
    with job.target.compile_lock, world.lock:
        node = HostCall(job)
        what = f"compiling {job.call()} for a host call in {chain_name(job.chain)}"
        node.dispatcher = compiler.build(job, node, job.target.compile_host, what)
        _host_calls[job] = node
        runtime.count("compiles")
        return node
