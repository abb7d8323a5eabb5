"""Hooked calls: a call that hooks observe, run as its prehooks -> the call -> its posthooks.

Cassette's overdub pass rewrites every call into ``prehook(...)``, the call, ``posthook(...)``. Which hooks
observe a call of an Overdubbed callee is known only while numba types the caller (it depends on the
argument types), so the call is not rewritten in the caller: it is typed as a call of a *hooked call*, a
small function generated for the call's arity and its hooks, compiled in the caller's chain like any
callee::

    def hooked(__a0):
        __pre0(__a0)                    # each prehook (a Direct: its def, compiled one context down from its own)
        __result = __callee(__a0)       # the call, resolved as without hooks (an Unobserved callee)
        __post0(__result, __a0)         # each posthook, with (result, *args): Cassette's order
        return __result

A hook of every call (``prehook(od.Any)``) gets the callee first (after the result, for a posthook), as the
constant ``__f`` of the type ``od.Callee[callee]``, which it may dispatch on. A call no hook observes is
resolved as before: nothing is generated, the caller's code does not change.

Which hooks observe a call (:func:`observing`): the hooks of each context of the chain, in order, down to
the first context whose overdub takes the call -- a context's overdub handles the call at its level, and
deeper contexts observe what that overdub calls (one context down), the way each PyTorch dispatch mode
sees what the mode above it calls. Prehooks run in chain order (the launched context first); posthooks in
reverse, so that each context's hooks enclose the deeper ones'. A hook's body, like an overdub's, is
compiled one context down from its context: a context's hooks never observe themselves.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable
from typing import Any

from . import bridge
from .hooktables import POSTHOOK, PREHOOK
from .registry import Method
from .rewrite import Direct, Overdubbed, Unobserved, interned
from .types import Callee, CalleeType

__all__ = ["observing", "hooked_call"]

_generated = itertools.count()

# (method, the chain its body compiles in, does it take the callee first), in the order they run
Hooks = tuple[tuple[Method, Any, bool], ...]


class CalleeValue:
    """The callee a hook of every call receives first: in compiled code a constant of its ``Callee[f]``."""

    __slots__ = ("type",)

    def __init__(self, callee: object) -> None:
        self.type = Callee[callee]


bridge.register_opaque(CalleeValue, CalleeType, lambda value: value.type)


def observing(
    site: Overdubbed, argtypes: tuple[Any, ...], kwtypes: tuple[Any, ...], result_type: Callable[[], Any]
) -> tuple[Hooks, Hooks]:
    """(prehooks, posthooks) observing a call of ``site`` with ``argtypes`` and keyword arguments of
    ``kwtypes`` (hooks take them positionally, in call order): each a (method, chain its body compiles in)
    pair, in the order they run. Posthooks dispatch on ``(result_type(), *argtypes)``; the
    result's type is asked for only where a context has posthooks. Every lookup is an edge of the node being
    built. Calls of the target's stand-ins for what is no function elsewhere are not observed."""
    if site.chain[-1].hides(site.callee):
        return (), ()
    observers = []
    for depth, ctx in enumerate(site.chain):
        if not ctx.overdubbable:
            break
        observers.append((ctx, site.chain[depth + 1 :]))
        if ctx.table(site.callee).dispatch(argtypes).method is not None:
            break  # this context's overdub takes the call; deeper contexts observe what it calls
    hooktypes = argtypes + kwtypes
    pre = [
        (method, below, every)
        for ctx, below in observers
        for method, every in ctx.hooks(PREHOOK, site.callee, hooktypes)
    ]
    post = []
    if any(ctx.observes(POSTHOOK) for ctx, _ in observers):
        posttypes = (result_type(),) + hooktypes
        post = [
            (method, below, every)
            for ctx, below in observers
            for method, every in ctx.hooks(POSTHOOK, site.callee, posttypes)
        ]
    return tuple(pre), tuple(reversed(post))


def hooked_call(site: Overdubbed, pre: Hooks, post: Hooks, nargs: int, kwnames: tuple[str, ...]) -> Callable[..., Any]:
    """The hooked call of ``site`` for these hooks and this arity, generated once and kept by the site (which
    lives as long as compiled code refers to it)."""
    key = (
        tuple((m.func, chain, every) for m, chain, every in pre),
        tuple((m.func, chain, every) for m, chain, every in post),
        nargs,
        kwnames,
    )
    if site.hooked_calls is None:
        site.hooked_calls = {}
    func = site.hooked_calls.get(key)
    if func is None:
        func = site.hooked_calls[key] = _generate(site, pre, post, nargs, kwnames)
    return func


def _generate(site: Overdubbed, pre: Hooks, post: Hooks, nargs: int, kwnames: tuple[str, ...]) -> Callable[..., Any]:
    """The source of the hooked call: positional parameters ``__a0, ...``, keyword ones named as the call
    names them (so the caller's keywords bind), the hooks and the callee as globals. The callee gets the
    call's arguments as the call passes them; hooks get them all positionally, keywords in call order."""
    positional = [f"__a{i}" for i in range(nargs)]
    passed = ", ".join(positional + [f"{name}={name}" for name in kwnames])
    observed = ", ".join(positional + list(kwnames))  # hooks take keyword arguments in call order
    name = getattr(site.callee, "__name__", "call")
    namespace = {
        "__name__": __name__,
        "__callee": interned(Unobserved, site.chain, site.callee),
        "__f": CalleeValue(site.callee),
    }
    lines = [f"def hooked({', '.join(positional + list(kwnames))}):"]
    for i, (method, chain, every) in enumerate(pre):
        namespace[f"__pre{i}"] = interned(Direct, chain, method.func)
        lines.append(f"    __pre{i}({', '.join((['__f'] if every else []) + ([observed] if observed else []))})")
    lines.append(f"    __result = __callee({passed})")
    for i, (method, chain, every) in enumerate(post):
        namespace[f"__post{i}"] = interned(Direct, chain, method.func)
        lines.append(
            f"    __post{i}({', '.join(['__result'] + (['__f'] if every else []) + ([observed] if observed else []))})"
        )
    lines.append("    return __result")
    source = "\n".join(lines) + "\n"
    filename = f"<overdub hooked call of {name} {next(_generated)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for debug info
    exec(compile(source, filename, "exec"), namespace)
    func: Callable[..., Any] = namespace["hooked"]
    func.__qualname__ = f"hooked({getattr(site.callee, '__qualname__', name)})"
    return func
