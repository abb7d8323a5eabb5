"""The target-independent driver: rewrite -> typing (dispatch, edges) -> target library; the caches.

Two caches, both of :mod:`overdub.world` nodes, both checked by a flag (plus the per-namespace version check
of :mod:`overdub.bindings`):

* compiled **method instances** -- a def compiled in a context chain for concrete argument types -- are
  shared by every kernel that calls them, while valid;
* compiled **kernels**, one per (kernel, argument types, context chain), each holding the launcher its
  target made.

:func:`resolve_call` is called by numba's type inference (through :mod:`overdub.bridge`) for every call of an
Overdubbed callee: it asks the chain's overdub tables, then the callee itself, records each answer as an
edge of the node being built, and compiles what it picked.
"""
from __future__ import annotations

import itertools
import logging
import threading
import types as pytypes

from . import world
from .bindings import Guarded
from .registry import GenericFunction, MethodError
from .rewrite import Overdubbed, rewrite, substitute

log = logging.getLogger("overdub")

_stats = {"compiles": 0, "method_instances": 0}
_stats_lock = threading.Lock()
_launches = itertools.count()      # next() is atomic under the GIL: no lock on the hot path


def count(name: str, n: int = 1) -> None:
    with _stats_lock:
        _stats[name] += n


def count_launch() -> None:
    next(_launches)


def stats() -> dict:
    """Counters since the process started: kernels compiled, launches, method instances compiled."""
    with _stats_lock:
        counters = dict(_stats)
    counters["launches"] = int(repr(_launches)[6:-1]) + _native_launches()  # repr "count(N)" reads, not advances
    return counters


def _native_launches() -> int:
    try:
        from ._fastlaunch import launch_count
    except ImportError:
        return 0
    return launch_count()


class CompileError(Exception):
    """A kernel could not be compiled; the message is numba's, with the kernel's source lines."""


def type_list(argtypes) -> str:
    return ", ".join(str(t) for t in argtypes)


# --- method instances -----------------------------------------------------------------------------------

class CompiledMethod(Guarded):
    """A def compiled in a context chain for concrete argument types."""

    __slots__ = ("key", "sig", "impl_key", "keepalive")

    def __init__(self, key):
        super().__init__()
        self.key = key
        self.sig = self.impl_key = self.keepalive = None

    def on_invalidate(self, cause: str) -> None:
        if _methods.get(self.key) is self:
            del _methods[self.key]

    def describe(self) -> str:
        chain, func, argtypes, _ = self.key
        return f"{func.__qualname__}({type_list(argtypes)}) compiled in {chain_name(chain)}"


_methods: dict[tuple, CompiledMethod] = {}


def chain_name(chain: tuple) -> str:
    return "/".join(ctx.name for ctx in chain)


def _use(node: Guarded) -> None:
    """The node being built depends on ``node``, on every global ``node`` read, and needs what it needs."""
    world.consult(node)
    builder = world.being_built()
    if isinstance(builder, Guarded):
        builder.guard.include(node.guard)
        builder.needs |= node.needs


def compile_method(func: pytypes.FunctionType, chain: tuple, typing_context, argtypes: tuple, kws: dict):
    """Compile ``func`` (rewritten in ``chain``) for ``argtypes``; reuse a valid earlier compile."""
    key = (chain, func, argtypes, tuple(sorted((k, v) for k, v in kws.items())))
    node = _methods.get(key)
    if node is not None and node.sig is None:
        from .bridge import call_sites
        sites = call_sites()
        raise CompileError(f"{func.__qualname__}({type_list(argtypes)}) calls itself"
                           f"{' at ' + sites[0] if sites else ''}: recursion is not supported in kernels")
    if node is None or not node.usable():
        node = _methods[key] = CompiledMethod(key)        # in progress until it has a signature
        try:
            with world.building(node):
                rewritten = rewrite(func, chain)
                node.sig, node.impl_key, node.keepalive = target_of(chain).compile_method(
                    rewritten, typing_context, argtypes, kws)
        except BaseException:
            if _methods.get(key) is node:
                del _methods[key]
            raise
        count("method_instances")
    _use(node)
    return node.sig, node.impl_key


def target_of(chain: tuple):
    return chain[-1].target


# --- dispatch during typing -----------------------------------------------------------------------------

def _raise_at_call_site(error: MethodError):
    from .bridge import call_sites
    sites = call_sites()
    if sites:
        error.call_site = " <- ".join(sites)
    raise error


def resolve_call(site: Overdubbed, typing_context, args: tuple, kws: dict):
    """Resolve a call of an Overdubbed callee during numba's typing: (signature, implementation key).

    Order: each context of the chain (the first applicable overdub wins; its body compiles one context
    down), the chain's forwards (``print`` -> ``cuprintln``), then the callee itself: a generic function's
    method, a plain function compiled in the same chain, or whatever numba knows it as.
    """
    from .bridge import delegate, unliteral
    chain, callee = site.chain, site.callee
    argtypes = tuple(unliteral(a) for a in args)
    kwtypes = {k: unliteral(v) for k, v in kws.items()}
    for depth, ctx in enumerate(chain):
        if not ctx.overdubbable:
            break
        mi = ctx.table(callee).dispatch(argtypes)
        if mi.method is not None:
            return compile_method(mi.method.func, chain[depth + 1:], typing_context, argtypes, kwtypes)
        if mi.ambiguous:
            _raise_at_call_site(mi.error())
    for ctx in chain:
        forward = ctx.forwarded(callee)
        if forward is not None:
            return resolve_call(substitute(forward, chain), typing_context, args, kws)
    if getattr(callee, "__overdub_intrinsic__", False):
        callee = callee.device
    if isinstance(callee, GenericFunction):
        if kws:
            raise TypeError(f"{callee.__name__}: generic functions take positional arguments only")
        mi = callee.table.dispatch(argtypes)
        if mi.method is None:
            _raise_at_call_site(mi.error())
        return compile_method(mi.method.func, chain, typing_context, argtypes, kwtypes)
    if isinstance(callee, pytypes.FunctionType):
        return compile_method(callee, chain, typing_context, argtypes, kwtypes)
    sig, impl_key = delegate(typing_context, callee, args, kws)
    if sig is None:
        _raise_at_call_site(MethodError(getattr(callee, "__name__", repr(callee)), argtypes))
    return sig, impl_key


# --- kernels --------------------------------------------------------------------------------------------

class Kernel(Guarded):
    """A compiled kernel: its launcher, valid while every edge it consulted holds."""

    __slots__ = ("key", "launcher", "invalidated_by")

    def __init__(self, key):
        super().__init__()
        self.key = key
        self.launcher = None
        self.invalidated_by: str | None = None

    def on_invalidate(self, cause: str) -> None:
        self.invalidated_by = cause

    def describe(self) -> str:
        func, argtypes, chain = self.key
        return f"kernel {func.__qualname__}({type_list(argtypes)}) in {chain_name(chain)}"


_kernels: dict[tuple, Kernel] = {}


def cached_kernel(func, argtypes: tuple, chain: tuple) -> Kernel:
    """The launch path's lookup: a usable compiled kernel, compiling (again) only when needed."""
    key = (func, argtypes, chain)
    kernel = _kernels.get(key)
    if kernel is not None and kernel.usable():
        return kernel
    return _compile_kernel(key, kernel)


def _compile_kernel(key, stale: Kernel | None) -> Kernel:
    func, argtypes, chain = key
    target = target_of(chain)
    with target.compile_lock, world.lock:
        current = _kernels.get(key)
        if current is not None and current is not stale and current.usable():
            return current             # another thread compiled it meanwhile
        reason = _reason(func, argtypes, stale)
        kernel = Kernel(key)
        try:
            with world.building(kernel):
                rewritten = rewrite(func, chain)
                kernel.launcher = target.compile_kernel(rewritten, argtypes)
        except MethodError:
            raise
        except Exception as exc:
            from .bridge import compile_error_message
            message = compile_error_message(exc)
            if message is None:
                raise
            raise CompileError(f"compiling kernel {func.__qualname__}({type_list(argtypes)}) for "
                               f"{target.name}:\n{message}") from None
        _kernels[key] = kernel
        count("compiles")
        log.info("compiled %s(%s) for %s: %s", func.__qualname__, type_list(argtypes), target.name, reason)
        return kernel


def _reason(func, argtypes, stale: Kernel | None) -> str:
    call = f"{func.__qualname__}({type_list(argtypes)})"
    if stale is None:
        return f"first launch of {call}"
    return stale.invalidated_by or f"a global read by {call} was rebound"


def explain(func, argtypes: tuple, chain: tuple) -> list[str]:
    """The edges of the cached kernel for these argument types: what its validity depends on."""
    kernel = _kernels.get((func, argtypes, chain))
    return [] if kernel is None else [node.describe() for node in kernel.edges]
