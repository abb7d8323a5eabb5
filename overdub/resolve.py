"""Dispatch during typing: a call of an Overdubbed callee resolved while numba types its caller.

Each Overdubbed callee is typed as an :class:`OverdubCallType` (registered with the typing bridge here: the
driver owns the type whose typing calls it), whose ``get_call_type`` calls :func:`resolve_call` with the
argument types. It asks the chain's overdub tables, then the methods added to the callee, then the callee
itself, records each answer as an edge of the node being built, and compiles what it picked
(:func:`overdub.instances.compile_callee`); an operator no table took is numba's own, and a call the chain's
hooks observe becomes the generated function running them around it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

from numba.core import types as nt

from . import bridge, hooks, world
from .instances import Answer, compile_callee
from .job import Chain
from .operators import OperatorSite, numba_signature
from .registry import GenericFunction, Method, MethodError, MethodMatch
from .rewrite import Overdubbed, Unobserved, interned, substitute
from .tables import asked

if TYPE_CHECKING:
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature

    from .roots import TargetRoot

__all__ = ["OverdubCallType", "resolve_call"]


class OverdubCallType(nt.Callable):
    """The numba type of one Overdubbed callee; dispatch happens in ``get_call_type``."""

    def __init__(self, site: Overdubbed) -> None:
        self.site = site
        self._impl_keys: dict[tuple[nt.Type, ...], object] = {}
        # (the node being built, weakly; its answers by argument types)
        self._answers: tuple[weakref.ref[world.Node] | None, dict[tuple[object, ...], Answer]] = (None, {})
        name = getattr(site.callee, "__qualname__", None) or getattr(site.callee, "__name__", repr(site.callee))
        super().__init__(name=f"overdub({name})")

    @property
    def key(self) -> Overdubbed:
        return self.site

    def get_call_type(self, context: TypingContext, args: Sequence[nt.Type], kws: Mapping[str, nt.Type]) -> Signature:
        sig, impl_key = self._resolved(context, tuple(args), dict(kws))
        self._impl_keys[tuple(sig.args)] = impl_key
        return sig

    def _resolved(self, context: TypingContext, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]) -> Answer:
        """:func:`resolve_call`, once per argument types for the node being built: numba's type inference
        asks again each time it propagates, and the first answer's edges are already the node's (a
        redefinition waits for the compile, which holds the world's lock)."""
        builder, call = world.being_built(), (args, tuple(sorted(kws.items())))
        ref, answers = self._answers
        if builder is None or ref is None or ref() is not builder:
            answers = {}
            self._answers = (None if builder is None else weakref.ref(builder), answers)
        answer = answers.get(call)
        if answer is None:
            answer = resolve_call(self.site, context, args, kws)
            if builder is not None:
                answers[call] = answer
        return answer

    def get_call_signatures(self) -> tuple[list[Signature], bool]:
        return [], True

    def get_impl_key(self, sig: Signature) -> object:
        return self._impl_keys[tuple(sig.args)]


bridge.register_opaque(Overdubbed, OverdubCallType)


def _raise_at_call_site(error: MethodError) -> NoReturn:
    sites = bridge.call_sites()
    if sites:
        error.call_site = " <- ".join(sites)
    raise error


def resolve_call(
    site: Overdubbed, typing_context: TypingContext, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]
) -> Answer:
    """Resolve a call of an Overdubbed callee during numba's typing: (signature, implementation key).

    Order: each context of the chain (the first applicable overdub wins; its body compiles one context
    down), the methods added to the callee with ``od.method`` and, for an operator, the dunders of its
    operands' classes (:mod:`overdub.dunders`), the chain's forwards (``print`` -> ``cuprintln``), then the
    callee itself: a generic function's method, a plain function -- or the Python function of a numba
    ``njit`` or ``cuda.jit(device=True)`` dispatcher -- compiled in the same chain (so it is an edge like
    any callee, and compiles for the target with no GPU present), or, for what numba implements itself
    (``@overload``, ``@intrinsic``, libdevice, fp16, cooperative groups: Python placeholders whose bodies
    mean nothing; an operator of a kernel), numba's own typing.
    """
    argtypes = tuple(bridge.unliteral(a) for a in args)
    if not site.dispatched:  # a hook method, called by a hooked call
        return compile_callee(site.callee, site.chain, typing_context, args, kws)
    hooked = _hooked_call(site, typing_context, args, kws) if site.observed else None
    if hooked is not None:
        return compile_callee(hooked, site.chain, typing_context, args, kws)
    ops = site.operators if isinstance(site, OperatorSite) else (site.callee,)
    for op in ops:  # a += b: iadd's tables, then add's (Python's fallback)
        found = _user_method(site.chain, op, argtypes)
        if found is not None:
            func, chain = found
            return compile_callee(func, chain, typing_context, args, kws)
    if isinstance(site, OperatorSite):
        return _numba_operator(site, typing_context, args, argtypes)
    return _resolve_callee(site, typing_context, args, kws, argtypes)


def _user_method(
    chain: Chain, callee: Callable[..., Any], argtypes: tuple[nt.Type, ...]
) -> tuple[Callable[..., Any], Chain] | None:
    """(the def, the chain to compile it in) of the overdub or added method a call reaches, or None. Each
    table asked (:func:`overdub.tables.asked`) is an edge, whatever its answer."""
    for each in asked(chain, callee):
        match = each.table.dispatch(argtypes)
        if match.method is not None:
            return match.method.func, each.below
        if match.ambiguous:
            _raise_at_call_site(cast(MethodError, match.error()))  # an ambiguity's
    return None


def _numba_operator(
    site: OperatorSite, typing_context: TypingContext, args: tuple[nt.Type, ...], argtypes: tuple[nt.Type, ...]
) -> Answer:
    """An operator no table took: numba's own typing of its node, which the node is turned back into. Where
    numba has no meaning for it either, a MethodError listing the methods added to the operator -- or, if
    none was, numba's own error, as for an operator never rerouted."""
    candidates = [
        m for op in site.operators for each in asked(site.chain, op) if not each.overdub for m in each.table.methods
    ]
    try:
        sig = numba_signature(site, typing_context, args)
    except Exception as exc:
        if not candidates or bridge.compile_error_message(exc) is None:
            raise
        sig = None
    if sig is None:
        _raise_at_call_site(MethodError(getattr(site.callee, "__name__", repr(site.callee)), argtypes, candidates))
    site.by_numba.add(tuple(sig.args))
    return sig, None


def _resolve_callee(
    site: Overdubbed,
    typing_context: TypingContext,
    args: tuple[nt.Type, ...],
    kws: dict[str, nt.Type],
    argtypes: tuple[nt.Type, ...],
) -> Answer:
    chain, callee = site.chain, site.callee
    for ctx in chain:
        forward = ctx.forwarded(callee)
        if forward is not None:
            return resolve_call(_forwarded(site, forward), typing_context, args, kws)
    if getattr(callee, "__overdub_intrinsic__", False):
        callee = cast(Any, callee).device  # an intrinsic: its device function
    if isinstance(callee, GenericFunction):
        if kws:
            raise TypeError(f"{callee.__name__}: generic functions take positional arguments only")
        match = callee.table.dispatch(argtypes)
        if match.method is not None:
            return compile_callee(match.method.func, chain, typing_context, args, kws)
        converted = _converted(match) if match.unmatched() else None
        if converted is None:
            _raise_at_call_site(cast(MethodError, match.error()))  # no method: the error says why
        declared = cast("tuple[nt.Type, ...]", converted.sig)  # a numba signature's: numba types
        return compile_callee(converted.func, chain, typing_context, declared, kws)
    function = bridge.python_function(callee)
    if function is not None and not bridge.numba_implements(typing_context, callee):
        return compile_callee(function, chain, typing_context, args, kws)
    target = cast("TargetRoot", chain[-1]).target
    inlined = target.inlined_overload(typing_context, callee, args, kws)
    if inlined is not None:
        return compile_callee(inlined, chain, typing_context, args, kws)
    sig, impl_key = target.delegate(typing_context, callee, args, kws)
    if sig is None:
        _raise_at_call_site(MethodError(getattr(callee, "__name__", repr(callee)), argtypes))
    return sig, impl_key


def _converted(match: MethodMatch) -> Method | None:
    """The numba signature's method a call no signature takes converts its arguments to, as numba-cuda types
    a call of a device function with explicit signatures (numba casts the arguments at the call); None where
    none converts. The choice rests on ``match``, the "no method" answer, which each such method invalidates."""
    methods = [m for m in match.table.methods if m.converts]
    chosen = bridge.converted_signature(match.argtypes, [m.sig for m in methods]) if methods else None
    return None if chosen is None else next(m for m in methods if m.sig is chosen)


def _hooked_call(
    site: Overdubbed, typing_context: TypingContext, args: tuple[nt.Type, ...], kws: dict[str, nt.Type]
) -> Callable[..., Any] | None:
    """The generated function running this call with the hooks observing it (:mod:`overdub.hooks`), or
    None when none does."""

    def result_type() -> nt.Type:
        unobserved = interned(Unobserved, site.chain, site.callee)
        return bridge.unliteral(resolve_call(unobserved, typing_context, args, kws)[0].return_type)

    try:
        pre, post = hooks.observing(
            site,
            tuple(bridge.unliteral(a) for a in args),
            tuple(bridge.unliteral(k) for k in kws.values()),
            result_type,
        )
    except MethodError as error:  # ambiguous hooks
        _raise_at_call_site(error)
    return hooks.hooked_call(site, pre, post, len(args), tuple(kws)) if pre or post else None


def _forwarded(site: Overdubbed, forward: object) -> Overdubbed:
    """The callee a forward makes of ``site``: a call already hooked (Unobserved) is not observed again."""
    forwarded = cast(Overdubbed, substitute(forward, site.chain))  # a forward's target is a callable
    if not site.observed and type(forwarded) is Overdubbed:
        return cast(Overdubbed, interned(Unobserved, forwarded.chain, forwarded.callee))
    return forwarded
