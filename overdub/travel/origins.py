"""Where definitions come from: this process's origin, the root whose definitions it adopted last, and
the identity of what travels -- by name, or by origin.

A generic function, context or struct is found by module and qualified name where that names it outside
``__main__``; else by its *origin* -- the process that made it and its id there (:func:`origin`) -- so all
tasks share one object on a worker: the object made here for an origin met first (:func:`standing_for`).
A token's *root* is the process whose definitions it carries: this one, or the one whose snapshot it
adopted last (:data:`adopted`); its digest is numbered by the root (:func:`sequence`), and a key of a table
made by another process names that process (:func:`owner_process`). A forked child is a process of its own:
it gets an origin of its own, knows what its parent made by the parent's origins, and ships its parent's
definitions on.
"""

from __future__ import annotations

import os
import sys
import uuid
import weakref
from collections.abc import Callable

from .. import registry, world
from ..registry import GenericFunction
from ..runtime import runtime

__all__ = ["ORIGIN", "adopted", "root", "sequence", "owner_process", "origin", "standing_for"]


# This process as the origin of what it makes that no name finds elsewhere (made anew in a forked child).
ORIGIN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
adopted: dict[object, object] = {}  # "digest": the snapshot adopted last; (origin, signature) -> its def's digest
runtime.register_cache(f"{__name__}.adopted", adopted, kept="what this process adopted from another: its definitions")


def root() -> str:
    """The process whose definitions this one has: the root of the snapshot it adopted last, else itself."""
    return str(adopted.get("root", ORIGIN))


def owner_process(key: str) -> str | None:
    """The process that made the table under ``key`` where it is known by origin (None: by name)."""
    head, colon, _ = key.partition(":")
    return head if colon and "-" in head and head.partition("-")[0].isdigit() else None


def sequence(digest: str) -> int:
    """The root's number of the snapshot ``digest`` (0 where it has none)."""
    head = digest.partition(".")[0]
    return int(head) if head.isdigit() else 0


def _named(obj: object, module: str | None, qualname: str) -> bool:
    """Does ``module`` + ``qualname`` find ``obj`` in every process (not ``__main__``, which is another
    module in each)?"""
    if module is None or module in ("__main__", "__mp_main__") or "<" in qualname:
        return False
    try:
        return registry.resolve_reference(module, qualname) is obj
    except Exception:  # not importable here: by its origin
        return False


def origin(obj: object, qualname: str | None = None) -> str | None:
    """None where module and qualname find ``obj``; else where it came from (this process, or the one it was
    adopted from)."""
    origin = _origins.get(obj)
    if origin is not None:
        return origin
    if _named(obj, getattr(obj, "__module__", None), str(qualname or getattr(obj, "__qualname__", "<>"))):
        return None
    if isinstance(obj, GenericFunction) and obj.__module__ in _MAINS and _named_in_main(obj):
        return None  # by name, where the worker has it (a spawned pool's __main__ is the same script)
    origin = f"{ORIGIN}:{id(obj)}"
    _made_here[origin] = obj
    _origins[obj] = origin
    return origin


_MAINS = ("__main__", "__mp_main__")  # the program's main module; in a spawned pool's worker, its second name


def _named_in_main(gf: GenericFunction) -> bool:
    main = sys.modules.get(gf.__module__)
    return main is not None and vars(main).get(gf.__qualname__) is gf


_origins: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._origins", _origins, kept="where objects made elsewhere come from")
_made_here: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()  # origin -> it
_foreign: dict[str, object] = {}  # origin -> the object standing for it here
# kept across runtime.reset(): they are definitions, not caches
runtime.register_cache(f"{__name__}._made_here", _made_here, kept="the objects this process made, by origin")
runtime.register_cache(f"{__name__}._foreign", _foreign, kept="definitions received from other processes")


def standing_for(origin: str, make: Callable[[], object]) -> object:
    with world.lock:
        found = _made_here.get(origin) or _foreign.get(origin)
        if found is None:
            found = _foreign[origin] = make()
            _origins[found] = origin
        return found


def _forked() -> None:
    """In a forked child: a process of its own, which knows what its parent made by the parent's origins and
    ships its parent's definitions on (its root is the parent's root)."""
    global ORIGIN
    parent_root = root()
    for origin, obj in list(_made_here.items()):
        _origins.setdefault(obj, origin)
        _foreign.setdefault(origin, obj)
    ORIGIN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    adopted["root"] = parent_root


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
