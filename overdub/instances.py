"""Method instances (Julia's name for a method compiled for concrete argument types): a def compiled in a
context chain, shared by every kernel that calls it while valid.

Numba's typing of a caller (:mod:`overdub.resolve`) asks :func:`compile_method` for each callee it picked:
the def is rewritten in the chain and compiled by the chain's target, or an earlier compile still valid is
reused (the runtime's method cache, keyed by the :class:`~overdub.job.CompileJob`). A method instance is an
:mod:`overdub.world` node; the node being built depends on it, on every global it read, and needs what it
needs. In a chain with state, the callee is compiled with the state's type first and called with the
caller's state. A def calling itself is refused: kernels do not recurse.
"""

from __future__ import annotations

import types as pytypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from . import bridge, world
from .bindings import Guarded
from .job import Chain, CompileError, CompileJob, chain_name, consult_chain
from .rewrite import rewrite, state_type, takes_state
from .runtime import runtime

if TYPE_CHECKING:
    from numba.core import types as nt
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from .targets import Target

__all__ = ["MethodInstance", "Answer", "compile_method", "compile_callee"]

Answer = tuple["Signature", object]  # how a call types: its signature, and the key lowering finds it by


class MethodInstance(Guarded):
    """A def compiled in a context chain for concrete argument types: its signature, the key numba's lowering
    finds it by, and what keeps its code alive (and registered with the target) while any caller lives."""

    __slots__ = ("job", "sig", "impl_key", "keepalive", "rewritten", "self_calls")

    def __init__(self, job: CompileJob) -> None:
        super().__init__()
        self.job = job
        self.sig: Signature | None = None  # None while it is being compiled
        self.impl_key: object = None
        self.keepalive: object = None
        self.rewritten: pytypes.FunctionType | None = None  # the def numba compiles, once rewritten
        self.self_calls: list[object] = []  # the registrations of its calls of itself, kept while it lives

    def on_invalidate(self, cause: str) -> None:
        runtime.methods.discard(self.job, self)

    def describe(self) -> str:
        return f"{self.job.call()} compiled in {chain_name(self.job.chain)}"


def _use(node: Guarded) -> None:
    """The node being built depends on ``node``, on every global ``node`` read, and needs what it needs."""
    world.consult(node)
    builder = world.being_built()
    if isinstance(builder, Guarded):
        builder.guard.include(node.guard)
        builder.needs |= node.needs


def compile_method(
    func: pytypes.FunctionType,
    chain: Chain,
    typing_context: TypingContext,
    argtypes: tuple[nt.Type, ...],
    kwtypes: dict[str, nt.Type],
) -> Answer:
    """Compile ``func`` (rewritten in ``chain``) for ``argtypes``; reuse a valid earlier compile."""
    job = CompileJob.of(func, argtypes, chain, kwtypes)
    node = cast("MethodInstance | None", runtime.methods.get(job))  # the runtime's method cache holds these
    if node is not None and node.sig is None:
        return _self_call(node, typing_context, argtypes)
    if node is None or not node.usable():
        node = MethodInstance(job)  # in progress until it has a signature
        runtime.methods.put(job, node)
        try:
            with world.building(node):
                consult_chain(chain)
                rewritten = node.rewritten = rewrite(func, chain)
                node.sig, node.impl_key, node.keepalive = _compile_for_launch_state(
                    job.target, func, rewritten, chain, typing_context, argtypes, kwtypes
                )
        except BaseException:
            runtime.methods.discard(job, node)
            world.retire([node])
            raise
        runtime.count("method_instances")
    _use(node)
    return cast("Signature", node.sig), node.impl_key  # compiled: it has its signature


def _self_call(node: MethodInstance, typing_context: TypingContext, argtypes: tuple[nt.Type, ...]) -> Answer:
    """A method instance being compiled calls itself: typed with the return type numba infers so far from its
    other returns, lowered as a call of itself (numba's own rule for self-recursion). A method reached again
    through another (``f`` calls ``g`` calls ``f``) is refused, as numba-cuda refuses it."""
    job, sites = node.job, bridge.call_sites()
    state = state_type(job.chain)
    sig = None
    if world.being_built() is node and node.rewritten is not None:
        typed_args = argtypes if state is None else (state, *argtypes)
        sig = job.target.self_call_signature(typing_context, node.rewritten, typed_args, argtypes)
    if sig is None:
        raise CompileError(
            f"{job.call()} calls itself{' at ' + sites[0] if sites else ''} through another function: "
            f"only a function calling itself directly compiles"
        )
    impl_key, keepalive = job.target.self_call(sig, state)
    node.self_calls.append(keepalive)
    return sig, impl_key


def _compile_for_launch_state(
    target: Target,
    func: pytypes.FunctionType,
    rewritten: pytypes.FunctionType,
    chain: Chain,
    typing_context: TypingContext,
    argtypes: tuple[nt.Type, ...],
    kwtypes: dict[str, nt.Type],
) -> tuple[Signature, object, object]:
    """The target's compile of ``func`` rewritten in a chain; in a chain with state (where the rewrite gave it
    the hidden state parameter), compiled with the state's type first and called with the caller's state."""
    state = state_type(chain)
    if state is None:
        if takes_state(func):
            sites = bridge.call_sites()
            raise CompileError(
                f"od.state() called{' at ' + sites[0] if sites else ''} in a launch without state: "
                f"it is the state a launch in a context with state passes -- declare it with "
                f"od.Context(name, state=T) and launch with od.cuda(..., context=ctx, state=value)"
            )
        return target.compile_method(rewritten, typing_context, argtypes, kwtypes)
    sig, impl_key, keepalive = target.compile_method(rewritten, typing_context, (state,) + argtypes, kwtypes)
    outer_sig, outer_key, registration = target.call_with_state(sig, impl_key)
    return outer_sig, outer_key, (keepalive, registration)


def compile_callee(
    func: Callable[..., Any],
    chain: Chain,
    typing_context: TypingContext,
    args: tuple[nt.Type, ...],
    kws: dict[str, nt.Type],
) -> Answer:
    """Compile a callee for the call's argument types without their literal values, and -- as numba does --
    with them where that fails to type (a constant a callee passes on to ``cuda.shared.array``, say)."""
    argtypes = tuple(bridge.unliteral(a) for a in args)
    kwtypes = {k: bridge.unliteral(v) for k, v in kws.items()}
    function = cast(pytypes.FunctionType, func)  # what a call compiles is a def: a method's, a hooked call's
    try:
        return compile_method(function, chain, typing_context, argtypes, kwtypes)
    except Exception as exc:
        if (argtypes, kwtypes) == (tuple(args), dict(kws)) or bridge.compile_error_message(exc) is None:
            raise
    return compile_method(function, chain, typing_context, tuple(args), dict(kws))
