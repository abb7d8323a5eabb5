"""Struct classes of the user's code by value: a class travels as its definition -- name, bases,
fields, defaults and methods -- known by the digest of that definition, so the receiving process makes one
class per definition, and a class redefined on the sender supersedes the one it replaces there, as it does
here. A class coming back (a result holding it) is that very class. Importing this module adds the reducer
to :mod:`overdub.byvalue`'s.
"""

from __future__ import annotations

import importlib
import threading
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
    """A struct class of the user's code by value -- its name, bases, fields and defaults, then its methods --
    known by the digest of that definition, so the receiving process makes one class per definition (and a
    class redefined on the sender supersedes the one it replaces there, as it does here). The methods travel
    as the class's state, after the class: a method naming its own class (``return Vec(...)``), or two
    classes naming each other, finds the class already made. None: not such a class."""
    if not isinstance(obj, structs.StructMeta) or obj.__dict__.get("__overdub_base__") is not None:
        return None
    if is_library_module(obj.__module__):
        return None
    if obj in _digesting.classes:  # met again inside its own definition, while its digest is being taken
        return _by_name, (obj.__module__, obj.__qualname__)
    cached = _struct_digests.get(obj)
    if cached is None:
        cached = _struct_digests[obj] = _definition(obj)
    digest, (*shape, members) = cached
    current = structs._latest.get((obj.__module__, obj.__qualname__), obj) is obj
    if current or digest not in _structs_arrived:  # coming back (a result holding it): this very class
        _structs_arrived[digest] = obj
    return _struct_arriving, (digest, *shape, current), members, None, None, _struct_filled


def _definition(obj: structs.StructMeta) -> tuple[str, tuple[object, ...]]:
    """The digest of a struct class's definition and its parts: module, qualname, name, bases, fields,
    defaults, members."""
    spec = typing.cast("typing.Any", obj).__overdub_spec__
    fields = tuple((n, t.cls if isinstance(t, StructType) else t) for n, t in zip(spec.names, spec.annotations))
    skip = {"__module__", "__qualname__", "__dict__", "__weakref__", "__annotations__", "_numba_type_"}
    members = {k: v for k, v in vars(obj).items() if k not in skip and not k.startswith("__overdub")}
    members.pop("__parameters__", None)
    bases = tuple(b for b in getattr(obj, "__orig_bases__", obj.__bases__) if b is not structs.StructValue)
    parts = (obj.__module__, obj.__qualname__, obj.__name__, bases, fields, dict(spec.defaults), members)
    building, snapshots.local.building = snapshots.building(), True
    _digesting.classes.add(obj)
    try:
        return snapshots.blob_digest(dumps(parts)), parts
    finally:
        _digesting.classes.discard(obj)
        snapshots.local.building = building


class _Digesting(threading.local):
    def __init__(self) -> None:
        self.classes: set[type] = set()  # the classes whose digest this thread is taking


_digesting = _Digesting()


def _by_name(module: str, qualname: str) -> None:
    """Stands for a class inside its own definition's digest; never unpickled."""
    raise AssertionError(f"{module}.{qualname}: a digest's stand-in is never unpickled")


def _struct_arriving(
    digest: str,
    module: str,
    qualname: str,
    name: str,
    bases: tuple[type, ...],
    fields: tuple[tuple[str, object], ...],
    defaults: dict[str, object],
    current: bool = True,
) -> type:
    """The class of the definition ``digest``: the one made here before, or a new one, its methods to come
    (:func:`_struct_filled`)."""
    found = _structs_arrived.get(digest)
    if found is not None and (not current or _current(found)):
        return found
    if current:  # the receiver's own import of its module first, its class statement superseded by this one
        _import_quietly(module)
    with world.lock:  # a definition run again with the same content (a cell re-run) is a new class
        found = _structs_arrived.get(digest)
        if found is None or (current and not _current(found)):
            namespace = {**defaults, "__module__": module, "__qualname__": qualname}
            namespace["__annotations__"] = dict(fields)
            bases = tuple(b for b in bases if b is not object) or (object,)
            made = pytypes.new_class(name, bases, {}, _filling(namespace))
            where = f"{module}.{qualname} of the process the work came from"
            found = typing.cast("type", structs.make(made, where, current))
            _awaiting[found] = (digest, (module, qualname, name, bases, fields, defaults))
            _structs_arrived[digest] = found
    return found


def _import_quietly(module: str) -> None:
    """Import ``module`` where this process can (its code's own reads would import it later, and its class
    statement would then supersede the class that arrived)."""
    try:
        importlib.import_module(module)
    except Exception:  # a module only the sender has (its __main__, a notebook's): the class alone arrives
        pass


def _struct_filled(cls: type, members: dict[str, object]) -> None:
    """Give a class made by :func:`_struct_arriving` its methods (once: a class made before keeps its own)."""
    with world.lock:
        awaiting = _awaiting.pop(cls, None)
        if awaiting is not None:
            structs.add_members(typing.cast("structs.StructMeta", cls), members)
            digest, shape = awaiting
            _struct_digests[cls] = (digest, (*shape, members))


_awaiting: weakref.WeakKeyDictionary[type, tuple[str, tuple[object, ...]]] = weakref.WeakKeyDictionary()
"""Classes arrived whose methods are still to come: their digests and definitions' parts but members."""
runtime.register_cache(f"{__name__}._awaiting", _awaiting, kept="classes mid-arrival: the pickle making one fills it")


def _current(cls: type) -> bool:
    return bool(cls.__dict__["__overdub_definition__"].valid)


def _filling(namespace: dict[str, object]) -> Callable[[dict[str, object]], None]:
    return lambda ns: ns.update(namespace)


byvalue.class_reducers.append(reduce_struct_class)
