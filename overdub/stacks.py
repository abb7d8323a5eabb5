"""Stacks: several contexts used together (``od.cuda(..., context=(ad, checking))``), one context per tuple.

A call asks the first context, its parents, then the second and its parents, ... then the target's own
context; of two contexts overdubbing the same callee, the one listed first wins and may delegate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import world
from .context import Context
from .runtime import runtime

if TYPE_CHECKING:
    from numba.core import types as nt

    from .targets import Target

__all__ = ["Stack", "stacked", "resolve"]


class Stack(Context):
    """Several contexts used together, as if stacked (``od.cuda(..., context=(ad, checking))``): a call asks the
    first, its parents, then the second and its parents, ... then the target's own context -- each context
    appears once, where it first does. An overdub's body runs one level down the stack (the contexts after
    its own), so an overdub of ``f`` in the first context that calls ``f`` reaches the second's overdub of
    ``f``: of two contexts overdubbing the same callee, the one listed first wins and may delegate. Hooks of
    every context fire. At most one of them may declare state (the launch's ``state=``). One stack per tuple
    of contexts: its compiled code is cached and invalidated as a single context's."""

    def __init__(self, contexts: tuple[Context, ...]) -> None:
        super().__init__("+".join(ctx.name for ctx in contexts))
        self.__module__ = __name__
        self.contexts = contexts
        declared = [ctx for ctx in contexts if ctx.state is not None]
        if len(declared) > 1:
            raise TypeError(
                f"context={contexts!r}: {declared[0]!r} and {declared[1]!r} both declare device state; a launch "
                f"passes one state, so at most one context of a stack may declare it"
            )
        self._state = declared[0].state if declared else None

    def __reduce__(self) -> tuple[object, ...]:
        return stacked, (self.contexts,)

    def chain(self, target: Target, state: object = None) -> tuple[Context, ...]:
        members: list[Context] = []
        for ctx in self.contexts:
            for member in ctx.chain(target, state)[:-2]:  # without the target's own context and root
                if member not in members:
                    members.append(member)
        root = target.root if state is None else target.root.with_state(cast("nt.Type", state))
        return (self, *members, target.base, root)

    def __repr__(self) -> str:
        return f"Stack({', '.join(map(repr, self.contexts))})"


_stacks: dict[tuple[Context, ...], Stack] = {}
runtime.register_cache(f"{__name__}._stacks", _stacks, kept="a stack is a definition: its kernels are keyed by it")


def stacked(contexts: tuple[Context, ...]) -> Stack:
    """The one :class:`Stack` of these contexts (in this order)."""
    stack = _stacks.get(contexts)
    if stack is None:
        for ctx in contexts:
            if not isinstance(ctx, Context):
                raise TypeError(f"context=(...) takes contexts, not {type(ctx).__name__} {ctx!r:.60}")
        with world.lock:
            stack = _stacks.setdefault(contexts, Stack(contexts))
    return stack


def resolve(context: Context | tuple[Context, ...] | None) -> Context | None:
    """A launch's ``context=``: a context, None, or a tuple of contexts (their stack)."""
    if isinstance(context, tuple):
        return stacked(context) if len(context) > 1 else (context[0] if context else None)
    return context
