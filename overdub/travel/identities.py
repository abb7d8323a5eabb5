"""Generic functions and contexts as a pickle holds them: by name, or by origin with the token.

A generic function pickles as its identity (:mod:`overdub.travel.origins`) -- and, outside a snapshot being
built, the token, so what arrives has the sender's methods; on arrival it is the one found by name, or the
one standing for its origin here (made empty first, a snapshot gives it its methods). A context of the
user's code that no name finds in every process travels by its origin with its name, parent and state
type; its overdubs travel in the snapshot. Importing this module installs both reducers (the registry's and
the context module's hooks).
"""

from __future__ import annotations

import pickle
import sys
from typing import cast

from .. import context, registry
from ..registry import GenericFunction
from . import arrival, origins, snapshots
from .snapshots import Token

__all__ = ["reduce_generic", "reduce_context"]


def _generic_named(origin: str | None, module: str | None, qualname: str, name: str) -> GenericFunction:
    """The generic function a snapshot or a pickle names: found by module and qualname, else the one standing
    for its origin here (made empty on first arrival; a snapshot gives it its methods)."""
    if origin is None or origins.owner_process(origin) is None:  # by name (also one a worker knew only by its name)
        try:
            found = registry.resolve_reference(module or "", qualname)
            if isinstance(found, GenericFunction):
                return found
        except Exception:  # not importable here (a module only the client has): by value
            pass
        origin = origin or f"{module}.{qualname}"
    return cast("GenericFunction", origins.standing_for(origin, lambda: GenericFunction(name, module, qualname)))


def _generic_arriving(
    origin: str | None, module: str | None, qualname: str, name: str, token: Token
) -> GenericFunction:
    arrival.adopt(*token)
    return _generic_named(origin, module, qualname, name)


def reduce_generic(gf: GenericFunction) -> tuple[object, ...]:
    """How a generic function pickles: its identity, and (outside a snapshot being built) the token."""
    module = "__main__" if gf.__module__ == "__mp_main__" else gf.__module__  # the program's, in every process
    identity = (origins.origin(gf), module, gf.__qualname__, gf.__name__)
    if snapshots.building() or (not snapshots.ships(gf.__module__) and identity[0] is None):
        return _generic_named, identity
    token = snapshots.snapshot()
    why = snapshots.unshippable.get(identity[0] or f"{gf.__module__}.{gf.__qualname__}")
    if why is not None:
        raise pickle.PicklingError(f"cannot ship {gf!r} to another process: its methods do not pickle ({why})")
    return (_generic_arriving, (*identity, token))


registry.reduce_generic = reduce_generic


def reduce_context(ctx: context.Context) -> tuple[object, ...] | None:
    """A context of the user's code that no name finds in every process (one of ``__main__``, of a function):
    by its origin, with its name, parent and state type; its overdubs travel in the snapshot. None: by
    reference."""
    if not snapshots.user_context(ctx) or origins.origin(ctx, _context_name(ctx)) is None:
        return None
    parts = (origins.origin(ctx, _context_name(ctx)), ctx.__module__, ctx.name, ctx.parent, ctx.state)
    if snapshots.building():
        return _context_arriving, (*parts, None)
    token = snapshots.snapshot()
    why = snapshots.unshippable.get(f"{snapshots.where(ctx)}:held")
    if why is not None:
        raise pickle.PicklingError(f"cannot ship {ctx!r} to another process: its hooks do not pickle ({why})")
    return _context_arriving, (*parts, token)


def _context_name(ctx: context.Context) -> str:
    module = sys.modules.get(ctx.__module__ or "")
    names = [name for name, value in vars(module).items() if value is ctx] if module else []
    return names[0] if names else "<unnamed>"


def _context_arriving(
    origin: str, module: str, name: str, parent: context.Context | None, state: object, token: Token | None
) -> context.Context:
    def make() -> context.Context:
        made = context.Context(name, parent, state)
        made.__module__ = module
        return made

    found = cast("context.Context", origins.standing_for(origin, make))
    if token is not None:
        arrival.adopt(*token)
    return found


context.reduce_context = reduce_context  # type: ignore[assignment]
