"""Struct classes of the user's code by value: a class travels as its definition -- name, bases,
fields, defaults and methods -- known by the digest of that definition, so the receiving process makes one
class per definition, and a class redefined on the sender supersedes the one it replaces there, as it does
here. A class coming back (a result holding it) is that very class. Importing this module adds the reducer
to :mod:`overdub.byvalue`'s.
"""

from __future__ import annotations

import types as pytypes
import typing
import weakref
from collections.abc import Callable

from .. import byvalue, structs, world
from ..byvalue import dumps
from ..libraries import is_library_module
from ..runtime import runtime
from ..types import StructType
from . import snapshots

__all__ = ["reduce_struct_class"]


_struct_digests: weakref.WeakKeyDictionary[type, tuple[str, tuple[object, ...]]] = weakref.WeakKeyDictionary()
_structs_arrived: dict[str, type] = {}  # digest -> the class made here of that definition
runtime.register_cache(f"{__name__}._struct_digests", _struct_digests, kept="a class's definition: a fact of it")
runtime.register_cache(f"{__name__}._structs_arrived", _structs_arrived, kept="struct classes received: definitions")


def reduce_struct_class(obj: object) -> tuple[object, ...] | None:
    """A struct class of the user's code by value -- its name, bases, fields, defaults and methods -- known by
    the digest of that definition, so the receiving process makes one class per definition (and a class
    redefined on the sender supersedes the one it replaces there, as it does here). None: not such a class."""
    if not isinstance(obj, structs.StructMeta) or obj.__dict__.get("__overdub_base__") is not None:
        return None
    if is_library_module(obj.__module__):
        return None
    cached = _struct_digests.get(obj)
    if cached is None:
        spec = typing.cast("typing.Any", obj).__overdub_spec__
        fields = tuple((n, t.cls if isinstance(t, StructType) else t) for n, t in zip(spec.names, spec.annotations))
        skip = {"__module__", "__qualname__", "__dict__", "__weakref__", "__annotations__", "_numba_type_"}
        members = {k: v for k, v in vars(obj).items() if k not in skip and not k.startswith("__overdub")}
        members.pop("__parameters__", None)
        bases = tuple(b for b in getattr(obj, "__orig_bases__", obj.__bases__) if b is not structs.StructValue)
        parts = (obj.__module__, obj.__qualname__, obj.__name__, bases, fields, dict(spec.defaults), members)
        building, snapshots.local.building = snapshots.building(), True
        try:
            digest = snapshots.blob_digest(dumps(parts))
        finally:
            snapshots.local.building = building
        cached = _struct_digests[obj] = (digest, parts)
    current = structs._latest.get((obj.__module__, obj.__qualname__), obj) is obj
    if current or cached[0] not in _structs_arrived:  # coming back (a result holding it): this very class
        _structs_arrived[cached[0]] = obj
    return _struct_arriving, (cached[0], *cached[1], current)


def _struct_arriving(
    digest: str,
    module: str,
    qualname: str,
    name: str,
    bases: tuple[type, ...],
    fields: tuple[tuple[str, object], ...],
    defaults: dict[str, object],
    members: dict[str, object],
    current: bool = True,
) -> type:
    found = _structs_arrived.get(digest)
    if found is not None and (not current or _current(found)):
        return found
    with world.lock:  # a definition run again with the same content (a cell re-run) is a new class
        found = _structs_arrived.get(digest)
        if found is None or (current and not _current(found)):
            namespace = {**members, **defaults, "__module__": module, "__qualname__": qualname}
            namespace["__annotations__"] = dict(fields)
            bases = tuple(b for b in bases if b is not object) or (object,)
            made = pytypes.new_class(name, bases, {}, _filling(namespace))
            where = f"{module}.{qualname} of the process the work came from"
            found = typing.cast("type", structs.make(made, where, current))
            _structs_arrived[digest] = found
            _struct_digests[found] = (digest, (module, qualname, name, bases, fields, defaults, members))
    return found


def _current(cls: type) -> bool:
    return bool(cls.__dict__["__overdub_definition__"].valid)


def _filling(namespace: dict[str, object]) -> Callable[[dict[str, object]], None]:
    return lambda ns: ns.update(namespace)


byvalue.class_reducers.append(reduce_struct_class)
