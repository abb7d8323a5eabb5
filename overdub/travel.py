"""The client's world travels with the work: overdub across processes (Dask, Ray, process pools, joblib).

A task run in another process imports the modules it names from files, which need not hold what this
process defined since: a method redefined by ``exec`` (a notebook cell, ``%autoreload``), a generic function
of ``__main__``, a global rebound, an array written in place. Julia asks for ``@everywhere``; overdub ships the
definitions with every piece of work instead.

* **What travels.** The *snapshot* (:func:`snapshot`): every method table of the user's code -- its generic
  functions', the overdubs it added to contexts (``od.CPU``'s and ``od.ALL``'s too), the methods ``od.method``
  added to plain callables -- each method's def by value (:mod:`overdub.byvalue`), each table pickled on its
  own, as bytes with a digest, rebuilt when this process's world or something a def reads changes. And the
  work's own code: each def of the user's code that reaches overdub or numba, by value, with what it reads
  (:func:`reduce_def`); structs (:func:`reduce_struct_class`) and contexts (:func:`reduce_context`) of the
  user's code by value.
* **When.** The *token* -- (root, digest, others, bytes) -- goes with everything above that a pickle holds,
  once per pickle (pickle's memo), through each engine's pickler (:mod:`overdub.engines` installs the hooks):
  the token of the work's submission (:class:`Pinned`; a def shipped on keeps the token it came with). Its
  digest is numbered by the root, and a process never goes back to an older snapshot of its root.
* **Arrival.** The receiving process compares the digest with the last one it adopted (one string
  comparison: the per-task cost when nothing changed) and otherwise *adopts* it (:func:`adopt`): in each
  table, the methods whose def differs from the one it has are defined again, those the sender has not are
  deleted -- through the normal definition path, so only their dependents recompile. Nothing raises while a
  task is unpickled (Dask hangs when it does): what cannot arrive makes every launch here an error naming it.
* **Identity.** A generic function, context or struct is found by module and qualified name where that
  names it outside ``__main__``; else by its origin -- the process that made it and its id there -- so all
  tasks share one object on a worker. A process never adopts its own definitions back, but does adopt the
  tables a worker made (a generic function defined in a task and returned).
* **Kernels by value.** A def arriving by value is a new function object in each task; :func:`interned`
  maps it to the first one with the same content, so a worker compiles a definition once.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import os
import pickle
import sys
import threading
import types as pytypes
import typing
import uuid
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from . import bindings, bridge, byvalue, context, extending, registry, structs, world
from .byvalue import Watch, arrived_by_value, dumps
from .digests import Uncacheable
from .embedded import embedded_digest
from .libraries import is_library_module
from .registry import GenericFunction, MethodTable, Signature
from .runtime import runtime
from .types import StructType

__all__ = [
    "snapshot",
    "adopt",
    "interned",
    "reduce_generic",
    "reduce_def",
    "reduce_struct_class",
    "reduce_context",
    "Shipped",
    "dumps",
]

Token = tuple[str, str, tuple[str, ...], bytes]  # (root, digest, the other processes owning tables, bytes)

# This process as the origin of what it makes that no name finds elsewhere (made anew in a forked child).
_ORIGIN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
_local = threading.local()  # building: a snapshot is being pickled on this thread (generic functions bare)


def _building() -> bool:
    return bool(getattr(_local, "building", False))


# --- the snapshot -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One method table in a snapshot: whose it is -- a generic function, or (context, callee) for a context's
    overdubs -- and its methods' signatures with their defs pickled (:func:`dumps`, each on its own, so an
    unchanged def is known by its bytes' digest)."""

    key: str  # the table, as the receiving process remembers what it adopted for it
    owner: object  # a GenericFunction, or (Context, callee)
    methods: tuple[tuple[Signature, str, bytes], ...]  # (signature, digest of the def's bytes, the bytes)
    signatures: frozenset[Signature]  # every method's, generated default-arity ones included


@dataclass(frozen=True, slots=True)
class ByName:
    """A function of an importable module, as a snapshot names a context's callee (not by value: overdub
    tables know a callee by its module and name)."""

    module: str
    qualname: str

    def __reduce__(self) -> tuple[object, ...]:
        return registry.resolve_reference, (self.module, self.qualname)


@dataclass(frozen=True, slots=True)
class Snapshot:
    world: int
    read: tuple[Watch, ...]
    token: Token

    def current(self) -> bool:
        return self.world == world.current_world() and all(watch.unchanged() for watch in self.read)


FORMAT = 3  # of a snapshot's bytes: (FORMAT, [(key, one table's entry pickled), ...])
_snapshots: dict[str, Snapshot] = {}  # "last": the snapshot this process last built
runtime.register_cache(f"{__name__}._snapshots", _snapshots)


def snapshot() -> Token:
    """This process's definitions, as a token (root, digest, others, bytes), cached until the world or a
    namespace they read changes. The root is the process they come from: this one, or the one whose snapshot
    it adopted (a worker shipping work on, or results back, ships its client's definitions -- which its
    client never adopts); ``others`` are the processes other than the root that made some of the tables."""
    pinned = getattr(_local, "pinned", None)
    if pinned is not None:  # a task submitted earlier, pickled now: the definitions of its submission
        return cast("Token", pinned[0])
    last = _snapshots.get("last")
    if last is not None and last.current() and last.token[0] == _root():
        return last.token
    with world.lock:  # no definition meanwhile
        age, read = world.current_world(), cast("list[Watch]", [])
        _local.building = True
        try:
            entries = [entry for entry in map(_entry, _tables(), itertools.repeat(read)) if entry is not None]
            entries += _held(read)
            blob = dumps((FORMAT, sorted(entries)), read)
        finally:
            _local.building = False
        root = _root()
        others = tuple(sorted({owner for owner in map(_owner_process, (key for key, _ in entries)) if owner}))
        others = tuple(owner for owner in others if owner != root)
        watches = {watch.key: watch for watch in read}  # each def once
        # numbered by the root's count: a process given an older snapshot of the root than it has adopted
        # (a result of a worker that had not seen the latest, a Ray object put earlier) never goes back to it
        if root == _ORIGIN:
            _count["built"] = sequence = _count.get("built", 0) + 1
        else:
            sequence = _sequence(str(_adopted.get("digest", "0.")))
        digest = f"{sequence}.{hashlib.blake2b(blob, digest_size=16).hexdigest()}"
        last = Snapshot(age, tuple(watches.values()), (root, digest, others, blob))
        _snapshots["last"] = last
    return last.token


_count: dict[str, int] = {}  # "built": how many snapshots this process built as a root
runtime.register_cache(f"{__name__}._count", _count, kept="the numbering of this process's snapshots")


def _sequence(digest: str) -> int:
    """The root's number of the snapshot ``digest`` (0 where it has none)."""
    head = digest.partition(".")[0]
    return int(head) if head.isdigit() else 0


def _root() -> str:
    return str(_adopted.get("root", _ORIGIN))


def _owner_process(key: str) -> str | None:
    """The process that made the table under ``key`` where it is known by origin (None: by name)."""
    head, colon, _ = key.partition(":")
    return head if colon and "-" in head and head.partition("-")[0].isdigit() else None


def _ships(module: str | None) -> bool:
    """Are definitions made by ``module`` shipped (the user's code), rather than the same in every process
    (an installed package's, at the version the worker has too)?"""
    return not is_library_module(module)


def _tables() -> list[tuple[str, object, MethodTable]]:
    """Every method table of the user's code with methods: (key, owner, table)."""
    found: list[tuple[str, object, MethodTable]] = []
    for gf in registry.every_generic_function():
        if gf.table.methods and _ships(gf.__module__):
            origin = _origin(gf)
            module = "__main__" if gf.__module__ == "__mp_main__" else gf.__module__
            found.append((origin or f"{module}.{gf.__qualname__}", gf, gf.table))
    owners: list[object] = [*context.every_context(), extending.user_methods]  # od.CPU's too; od.method's
    for ctx in owners:
        for callee, table in ctx.overdub_tables():  # type: ignore[attr-defined]
            if not any(_ships(method.func.__module__) for method in table.methods):
                continue
            found.append((f"{_where(ctx)}:{table.name}", (ctx, _by_name(callee)), table))
    return found


def _user_code(obj: object) -> bool:
    """Is ``obj`` a function, class or object of the user's code (not a string, a number, a library's)?"""
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and _ships(module)


def _user_context(ctx: object) -> bool:
    return isinstance(ctx, context.Context) and _ships(ctx.__module__)


def _where(ctx: object) -> str:
    origin = _origin(ctx) if _user_context(ctx) else None
    return origin or f"{type(ctx).__qualname__}:{ctx.__module__}:{getattr(ctx, 'name', '')}"


def _by_name(callee: object) -> object:
    """A context's callee as a snapshot names it: a top-level function by module and name (overdub tables
    know a callee so), anything else as it pickles."""
    if isinstance(callee, pytypes.FunctionType) and "<" not in callee.__qualname__:
        return ByName(callee.__module__, callee.__qualname__)
    return callee


@dataclass(frozen=True, slots=True)
class Held:
    """What a context holds besides its overdub tables (:meth:`~overdub.context.Context.travelling`): hooks,
    forwards, replacements, hooks turned off -- each item pickled on its own, known by its digest."""

    key: str
    ctx: object
    items: tuple[tuple[str, str, bytes], ...]  # (what it is, the digest of its bytes, the bytes)


def _held(read: list[Watch]) -> list[tuple[str, bytes]]:
    """The snapshot's entries of what the user's contexts hold besides tables (and of the target contexts,
    where the user's code added to them)."""
    found = []
    for ctx in context.every_context():
        key = f"{_where(ctx)}:held"
        try:
            items = []
            for kind, callee, value in ctx.travelling():
                if not (_user_code(value) or _user_code(callee)):
                    continue  # a target's own forward or replacement, say: the same in every process
                data = dumps((kind, _by_name(callee), value), read)
                items.append((f"{kind}:{getattr(callee, '__qualname__', callee)!r}", _digest(data), data))
            if items:
                found.append((key, dumps(Held(key, ctx, tuple(items)), read)))
        except Exception as exc:  # a hook closing over an open file, say: the context cannot travel
            _unshippable[key] = f"{type(exc).__name__}: {exc}"
        else:
            _unshippable.pop(key, None)
    return found


def _entry(table_of: tuple[str, object, MethodTable], read: list[Watch]) -> tuple[str, bytes] | None:
    """The snapshot's entry of a table, pickled on its own (so one that cannot arrive leaves the others right),
    or None (recorded in ``_unshippable``) where something in it does not pickle: a def closing over a lock,
    say."""
    key, owner, table = table_of
    try:
        methods = []
        for method in table.methods:
            if not method.generated:  # its def defines it again
                data = dumps(method.func, read)
                methods.append((method.sig, _digest(data), data))
        data = dumps(Entry(key, owner, tuple(methods), frozenset(m.sig for m in table.methods)), read)
    except Exception as exc:  # whatever pickling raises: this table does not travel
        _unshippable[key] = f"{type(exc).__name__}: {exc}"
        return None
    _unshippable.pop(key, None)
    return key, data


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_unshippable: dict[str, str] = {}  # key -> why its table does not travel
runtime.register_cache(f"{__name__}._unshippable", _unshippable)


# --- identities -------------------------------------------------------------------------------------------


def _named(obj: object, module: str | None, qualname: str) -> bool:
    """Does ``module`` + ``qualname`` find ``obj`` in every process (not ``__main__``, which is another
    module in each)?"""
    if module is None or module in ("__main__", "__mp_main__") or "<" in qualname:
        return False
    try:
        return registry.resolve_reference(module, qualname) is obj
    except Exception:  # not importable here: by its origin
        return False


def _origin(obj: object, qualname: str | None = None) -> str | None:
    """None where module and qualname find ``obj``; else where it came from (this process, or the one it was
    adopted from)."""
    origin = _origins.get(obj)
    if origin is not None:
        return origin
    if _named(obj, getattr(obj, "__module__", None), str(qualname or getattr(obj, "__qualname__", "<>"))):
        return None
    if isinstance(obj, GenericFunction) and obj.__module__ in _MAINS and _named_in_main(obj):
        return None  # by name, where the worker has it (a spawned pool's __main__ is the same script)
    origin = f"{_ORIGIN}:{id(obj)}"
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


def _standing_for(origin: str, make: Callable[[], object]) -> object:
    with world.lock:
        found = _made_here.get(origin) or _foreign.get(origin)
        if found is None:
            found = _foreign[origin] = make()
            _origins[found] = origin
        return found


# --- arrival ----------------------------------------------------------------------------------------------

_adopted: dict[object, object] = {}  # "digest": the snapshot adopted last; (origin, signature) -> its def's digest
runtime.register_cache(f"{__name__}._adopted", _adopted, kept="what this process adopted from another: its definitions")


def adopt(root: str, digest: str, others: tuple[str, ...], blob: bytes, starting: bool = False) -> None:
    """Make this process's definitions those of the snapshot ``digest`` from ``root`` (a no-op when it is the
    one adopted last; of this process's own definitions coming back, only the tables other processes made;
    of an older snapshot of the root than the one adopted, only those too -- unless ``starting``: a task
    submitted in that world starts, and runs in it)."""
    if _adopted.get("digest") == digest or (root == _ORIGIN and not others):
        return
    # an older snapshot of the root adopted here: only the tables other processes made in it are news
    older = not starting and root == _adopted.get("root") and _sequence(digest) < _sequence(str(_adopted.get("digest")))
    if older and not others:
        return
    with world.lock:
        if _adopted.get("digest") == digest:
            return
        try:
            entries = _read_entries(blob)
        except Exception as exc:  # never raise while unpickling (Dask hangs): every launch here says why instead
            _failed["the definitions"] = f"{type(exc).__name__}: {exc}"
            runtime.reset()  # nothing compiled here launches again without check_arrived's error
            return
        _failed.pop("the definitions", None)
        mine = root == _ORIGIN
        for key, data in entries:  # each table on its own: one that cannot arrive leaves the others right
            owner = _owner_process(key)
            if (owner or root) == _ORIGIN or ((mine or older) and owner in (None, root)):
                continue  # this process's own definitions, or the root's as this process has them already
            _adopt_one(root, key, data)
        if not (mine or older):
            _adopted["digest"], _adopted["root"] = digest, root


def _read_entries(blob: bytes) -> list[tuple[str, bytes]]:
    sent_format, entries = pickle.loads(blob)
    if sent_format != FORMAT:
        raise ValueError(
            f"they come in format {sent_format} of another overdub version; this one reads format {FORMAT}"
        )
    for key, data in entries:
        if not isinstance(key, str) or not isinstance(data, bytes):
            raise ValueError(f"an entry of another shape ({type(key).__name__}, {type(data).__name__})")
    return cast("list[tuple[str, bytes]]", entries)


def _adopt_one(root: str, key: str, data: bytes) -> None:
    entry = None
    try:
        entry = pickle.loads(data)
        if isinstance(entry, Held):
            _adopt_held(entry)
        else:
            _adopt_entry(entry)
    except Exception as exc:  # a module only the sender has, say
        _failed[key] = f"{type(exc).__name__}: {exc}"
        dropped = isinstance(entry, Entry) and _drop(entry, _failed[key])
        warnings.warn(
            f"overdub: the definitions of {key} sent from process {root} could not be adopted here "
            f"({_failed[key]}); " + ("its methods are dropped here" if dropped else "this process keeps its own"),
            RuntimeWarning,
            stacklevel=3,
        )
    else:
        _failed.pop(key, None)


def _drop(entry: Entry, why: str) -> bool:
    """Delete the methods of the table ``entry`` names (a call of it then fails with ``why``, never runs what
    the sender no longer has); False where its owner cannot be found."""
    try:
        table = _table_of(entry)[0]
    except Exception:  # the owner itself did not arrive
        return False
    table.unarrived = why
    for method in list(table.methods):
        table.remove(method.sig, "the definitions sent here could not be adopted")
    return True


_failed: dict[str, str] = {}  # what could not be adopted here -> why
runtime.register_cache(f"{__name__}._failed", _failed, kept="definitions that failed to arrive: an error until fixed")


def check_arrived() -> None:
    """Raise where definitions sent to this process could not be adopted (a kernel launched here would not
    run the sender's code): the cause, not a ``MethodError`` of what is missing."""
    if "the definitions" in _failed:
        raise RuntimeError(
            f"overdub: definitions sent to this process (pid {os.getpid()}) could not be adopted: "
            f"{_failed['the definitions']}"
        )


def _adopt_held(held: Held) -> None:
    ctx = cast("context.Context", held.ctx)
    for what, digest, data in held.items:
        if _adopted.get((held.key, what)) != digest:
            kind, callee, value = pickle.loads(data)
            ctx.define_travelled(kind, callee, value)
            _adopted[(held.key, what)] = digest


def _table_of(entry: Entry) -> tuple[MethodTable, str, GenericFunction | None]:
    """The table an entry names, the name its methods take, and the generic function a default-arity method
    calls (None: the def itself, as for a context's overdubs)."""
    if isinstance(entry.owner, GenericFunction):
        return entry.owner.table, entry.owner.__name__, entry.owner
    ctx, callee = cast("tuple[context.Context, object]", entry.owner)
    table = ctx.table(callee)
    return table, table.name, None


def _adopt_entry(entry: Entry) -> None:
    table, name, full = _table_of(entry)
    table.unarrived = None
    have = {method.sig: method for method in table.methods}
    for sig, digest, data in entry.methods:
        if _adopted.get((entry.key, sig)) == digest:
            continue
        method = have.get(sig)
        if method is not None and (entry.key, sig) not in _adopted and _same_def(method.func, digest):
            _adopted[(entry.key, sig)] = digest  # this process's own import has the sender's def (a spawned pool)
            continue
        func = pickle.loads(data)
        try:
            methods = registry.methods_from(name, func, sig, full=full)
        except TypeError:  # a signature that did not survive pickling: its def's own annotations
            methods = registry.methods_from(name, func, None, full=full)
        for made in methods:
            table.add(made)
        _adopted[(entry.key, sig)] = digest
    for method in list(table.methods):
        if method.sig not in entry.signatures:
            table.remove(method.sig, "the process the work came from has no such method")
            _adopted.pop((entry.key, method.sig), None)


def _same_def(func: object, digest: str) -> bool:
    try:
        return _digest(dumps(func)) == digest
    except Exception:  # does not pickle here: defined again from the sender's
        return False


def _generic_named(origin: str | None, module: str | None, qualname: str, name: str) -> GenericFunction:
    """The generic function a snapshot or a pickle names: found by module and qualname, else the one standing
    for its origin here (made empty on first arrival; a snapshot gives it its methods)."""
    if origin is None or _owner_process(origin) is None:  # by name (also one a worker knew only by its name)
        try:
            found = registry.resolve_reference(module or "", qualname)
            if isinstance(found, GenericFunction):
                return found
        except Exception:  # not importable here (a module only the client has): by value
            pass
        origin = origin or f"{module}.{qualname}"
    return cast("GenericFunction", _standing_for(origin, lambda: GenericFunction(name, module, qualname)))


def _generic_arriving(
    origin: str | None, module: str | None, qualname: str, name: str, token: Token
) -> GenericFunction:
    adopt(*token)
    return _generic_named(origin, module, qualname, name)


def reduce_generic(gf: GenericFunction) -> tuple[object, ...]:
    """How a generic function pickles: its identity, and (outside a snapshot being built) the token."""
    module = "__main__" if gf.__module__ == "__mp_main__" else gf.__module__  # the program's, in every process
    identity = (_origin(gf), module, gf.__qualname__, gf.__name__)
    if _building() or (not _ships(gf.__module__) and identity[0] is None):
        return _generic_named, identity
    token = snapshot()
    why = _unshippable.get(identity[0] or f"{gf.__module__}.{gf.__qualname__}")
    if why is not None:
        raise pickle.PicklingError(f"cannot ship {gf!r} to another process: its methods do not pickle ({why})")
    return (_generic_arriving, (*identity, token))


registry.reduce_generic = reduce_generic


# --- contexts and structs by value ------------------------------------------------------------------------


def reduce_context(ctx: context.Context) -> tuple[object, ...] | None:
    """A context of the user's code that no name finds in every process (one of ``__main__``, of a function):
    by its origin, with its name, parent and state type; its overdubs travel in the snapshot. None: by
    reference."""
    if not _user_context(ctx) or _origin(ctx, _context_name(ctx)) is None:
        return None
    parts = (_origin(ctx, _context_name(ctx)), ctx.__module__, ctx.name, ctx.parent, ctx.state)
    if _building():
        return _context_arriving, (*parts, None)
    token = snapshot()
    why = _unshippable.get(f"{_where(ctx)}:held")
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

    found = cast("context.Context", _standing_for(origin, make))
    if token is not None:
        adopt(*token)
    return found


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
        building, _local.building = _building(), True
        try:
            digest = _digest(dumps(parts))
        finally:
            _local.building = building
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


# --- defs by value ----------------------------------------------------------------------------------------

# The defs this process launched (or was asked to) as kernels: a cloudpickle ships one by value where it meets
# it (a task function of ``__main__`` naming it), as its cached bytes.
_kernels: weakref.WeakSet[pytypes.FunctionType] = weakref.WeakSet()
# a def -> (what its pickle read, the digest of its bytes, the bytes, whether they reach overdub or numba)
_def_blobs: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[tuple[Watch, ...], str, bytes, bool]] = (
    weakref.WeakKeyDictionary()
)
runtime.register_cache(f"{__name__}._kernels", _kernels, kept="which defs are kernels: a fact of each")
runtime.register_cache(f"{__name__}._def_blobs", _def_blobs)


def note_kernel(kernel: object) -> None:
    """``kernel`` is launched as a kernel here: wherever a pickle meets its def, it ships by value."""
    if type(kernel) is pytypes.FunctionType:
        _kernels.add(kernel)


def def_bytes(func: pytypes.FunctionType) -> tuple[str, bytes, bool]:
    """``func`` pickled by value without the snapshot (which travels beside it, as it changes on its own): the
    digest of those bytes, the bytes, and whether they reach overdub or numba; cached until something the
    pickle read changes (:class:`~overdub.byvalue.Watch`)."""
    cached = _def_blobs.get(func)
    if cached is None or not all(watch.unchanged() for watch in cached[0]):
        read: list[Watch] = []
        building, _local.building = _building(), True
        try:
            blob, reaches = byvalue.dumps_noting(func, read)
        finally:
            _local.building = building
        digest = "shipped-" + _digest(blob)
        cached = _def_blobs[func] = (tuple(read), digest, blob, reaches or func in _kernels)
        _sent[digest] = func
    return cached[1], cached[2], cached[3]


_sent: weakref.WeakValueDictionary[str, pytypes.FunctionType] = weakref.WeakValueDictionary()  # digest -> def
runtime.register_cache(f"{__name__}._sent", _sent)


def reduce_def(func: pytypes.FunctionType) -> tuple[object, ...] | None:
    """How an engine's pickler ships a def of the user's code: by value with the token where it reaches
    overdub or numba; None (as the engine would, by reference or by cloudpickle's value) for one that does
    not -- plain code (a pool's initializer and the task reading what it set) keeps its own module's state."""
    if _building():
        return None  # inside a snapshot or a def's bytes: Shipper ships it
    if getattr(_local, "plain", None) is func:  # the def a _Plain holds: as the engine ships it
        _local.plain = None
        return None
    pinned = getattr(_local, "pinned", None)
    if pinned is not None and pinned[2] is func:  # the function of a task submitted earlier: as it was then
        digest, blob, reaching = pinned[1]
    elif func in _arrived_with:  # shipped on (a Dask scheduler): as it came
        return _def_arriving, _arrived_with[func]
    else:
        try:
            digest, blob, reaching = def_bytes(func)
        except byvalue.Unshippable as exc:
            if exc.reaches:  # code of overdub's that cannot travel: said here, on the sender, naming it
                raise pickle.PicklingError(f"cannot ship {func.__qualname__} to another process: {exc}") from exc
            digest, blob, reaching = "", b"", False  # plain code the engine ships as it did (a lock by name)
    if not reaching:  # plain code keeps its engine's semantics (its module's globals are the worker's own),
        return _with_token, (snapshot(), _Plain(func))  # and brings the token: it may call what arrived before
    return _def_arriving, (snapshot(), digest, blob)


class Pinned:
    """A task's function as an engine that pickles later than the submission holds it (a pool's task thread):
    pickled with the definitions of the moment it was submitted -- the token and its def's bytes then, for
    everything the task's pickle holds."""

    __slots__ = ("func", "pin")

    def __init__(self, func: object) -> None:
        self.func = func
        reached = func if type(func) is pytypes.FunctionType and _ships(func.__module__) else None
        try:
            shipped = None if reached is None else def_bytes(reached)
        except byvalue.Unshippable:  # said as the engine pickles it (reduce_def)
            shipped = reached = None
        self.pin = (snapshot(), shipped, reached)

    def __call__(self, *args: object, **kwargs: object) -> object:  # a pool of threads calls it here
        return self.func(*args, **kwargs)  # type: ignore[operator]

    def __reduce__(self) -> tuple[object, ...]:
        if getattr(_local, "task", False):  # for the rest of this task's pickle (pickling_task)
            _local.pinned = self.pin
        return _itself, (self.func,)


def pickling_task(dumps: Callable[[object, int | None], bytes], obj: object, protocol: int | None) -> bytes:
    """``dumps(obj, protocol)``: a pool's pickle of one task, during which a :class:`Pinned` function pins the
    definitions; after it, they are this process's again."""
    _local.task = True
    try:
        return dumps(obj, protocol)
    finally:
        _local.task = False
        _local.pinned = None


class _Plain:
    """A def of plain code (or a task that is a method or an instance of the user's code) as its engine ships
    it (by reference, or cloudpickle's by value), within a pickle that brings the token first."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __reduce__(self) -> tuple[object, ...]:
        _local.plain = self.value  # the pickler saves it next: reduce_def lets the engine's reduce take it
        return _itself, (self.value,)


def reduce_task_object(obj: object) -> tuple[object, ...] | None:
    """How an engine's pickler ships a bound method, a class method or a callable instance (a ``Process``
    subclass's too) of the user's code -- a task that is no def: as it did, with the token first (its code
    calls the user's definitions, which must be the sender's). None: as the engine would."""
    if _building() or getattr(_local, "plain", None) is obj:
        _local.plain = None
        return None
    return _with_token, (snapshot(), _Plain(obj))


def _itself(value: object) -> object:
    return value


def _with_token(token: Token, value: object) -> object:
    adopt(*token)
    return value


def _def_arriving(token: Token, def_digest: str, blob: bytes) -> pytypes.FunctionType:
    """A def shipped as :func:`def_bytes`: the first def that arrived with these bytes, else these bytes
    unpickled (after the snapshot, whose generic functions the def names) -- or, in the process that sent it
    (a Dask scheduler or worker of this process), the def itself. Submitted in a world other than the one
    that def came with, a copy of its own, which ships on with that world's token. Never raises: a def that
    cannot be made here arrives as one raising why, when called."""
    adopt(*token)
    if token[0] == _ORIGIN:
        found = _sent.get(def_digest)
        if found is not None:
            return _copy_arrived(found, token, def_digest, blob)  # (which ships on as it came)
    found = _interned.get(def_digest)
    if found is not None and (not _recent or _recent[-1] is not found):
        _recent.append(found)
    if found is None:
        try:
            made = interned(pickle.loads(blob))
        except Exception as exc:  # a module only the sender has, say
            return _failing(f"{type(exc).__name__}: {exc}")
        found = _interned.setdefault(def_digest, made)
        _recent.append(found)
        _arrived_with[found] = (token, def_digest, blob)
        values = {name: value for name, value in found.__globals__.items() if not name.startswith("__")}
        _def_blobs.setdefault(found, ((Watch(found, values),), def_digest, blob, True))  # (its bytes as it came)
    if _arrived_with.get(found, (token,))[0][1] != token[1]:  # submitted in another world than it came with
        found = _copy_arrived(found, token, def_digest, blob)
    return found


def _copy_arrived(found: pytypes.FunctionType, token: Token, def_digest: str, blob: bytes) -> pytypes.FunctionType:
    """``found`` as a task submitted with ``token`` holds it: a function of the same code and namespace, which
    ships on with that token (one per def and world)."""
    copy = _copies.get((def_digest, token[1]))
    if copy is None:
        copy = pytypes.FunctionType(
            found.__code__, found.__globals__, found.__name__, found.__defaults__, found.__closure__
        )
        copy.__qualname__, copy.__module__, copy.__kwdefaults__ = (
            found.__qualname__,
            found.__module__,
            found.__kwdefaults__,
        )
        copy.__annotations__, copy.__doc__ = found.__annotations__, found.__doc__
        if arrived_by_value(found):
            byvalue.note_shipped(copy)
        _arrived_with[copy] = (token, def_digest, blob)
        if len(_copies) > 256:  # the worlds of tasks in flight: a few
            _copies.clear()
        _copies[(def_digest, token[1])] = copy
    return copy


# a def that arrived by value -> what it came with, (token, digest, bytes): it ships on so; (def, world) -> copy
_arrived_with: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[Token, str, bytes]] = weakref.WeakKeyDictionary()
_copies: dict[tuple[str, str], pytypes.FunctionType] = {}
runtime.register_cache(f"{__name__}._arrived_with", _arrived_with, kept="the definitions each def came with: a fact")
runtime.register_cache(f"{__name__}._copies", _copies)


def token_of(func: object) -> Token | None:
    """The token a def that arrived by value came with (the definitions of its submission), else None."""
    arrived = _arrived_with.get(func) if isinstance(func, pytypes.FunctionType) else None
    return None if arrived is None else arrived[0]


def _failing(why: str) -> pytypes.FunctionType:
    message = f"overdub: code sent to this process (pid {os.getpid()}) could not be made here: {why}"

    def failed(*args: object, **kwargs: object) -> None:
        raise RuntimeError(message)

    failed.__overdub_not_arrived__ = message  # type: ignore[attr-defined]  # od.cuda of it raises this first
    return cast("pytypes.FunctionType", failed)


# content digest -> the first def of that content, while anything holds it: the tasks running it, and the last
# few defs that arrived (a worker running one task after another keeps its kernel compiled between them)
_interned: weakref.WeakValueDictionary[str, pytypes.FunctionType] = weakref.WeakValueDictionary()
_recent: collections.deque[pytypes.FunctionType] = collections.deque(maxlen=8)
runtime.register_cache(f"{__name__}._recent", _recent)
# a def -> (the def it is interned to, its namespace's version tag then)
# (held weakly both ways: an entry naming its own key would keep it alive)
_interned_by_id: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[weakref.ref[pytypes.FunctionType], int]] = (
    weakref.WeakKeyDictionary()
)
runtime.register_cache(f"{__name__}._interned", _interned)
runtime.register_cache(f"{__name__}._interned_by_id", _interned_by_id)


def interned(func: pytypes.FunctionType) -> pytypes.FunctionType:
    """``func``, or the first def of the same content (code, defaults, closure, and everything it reads,
    transitively) where ``func`` arrived by value: each task's copy of a shipped kernel then finds the
    kernel compiled for the first. (A launch of an interned copy is not added to the launch table: its own
    namespace is re-checked here at each launch, through its version tag.)"""
    if not arrived_by_value(func):
        return func
    version = bindings.dict_version(func.__globals__)
    found = _interned_by_id.get(func)
    if found is not None and found[1] == version:
        canonical_now = found[0]()
        if canonical_now is not None:
            return canonical_now
    with world.lock:  # the digest asks numba's typing registries, as a compile does (under this lock)
        try:
            digest = embedded_digest(func, typing=False)[0]
        except Uncacheable:  # holds something with no content digest: compiled as it is
            canonical = func
        else:
            canonical = _interned.setdefault(digest, func)
        _interned_by_id[func] = (weakref.ref(canonical), version)
    return canonical


# --- a kernel as a task ships it ----------------------------------------------------------------------------


class Shipped:
    """A kernel as a task holds it: it pickles by value (its def, as :class:`~overdub.byvalue.Shipper` ships
    defs) with the token, so the receiving process runs the kernel and the methods the sender has now; it
    arrives as its def, :func:`interned`. A kernel of an installed package travels by reference."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: object) -> None:
        self.kernel = kernel

    def __reduce__(self) -> tuple[object, ...]:
        func = bridge.python_function(self.kernel) or self.kernel
        if hasattr(self.kernel, "launch_defaults"):  # an od.jit kernel: with its options, its def as engines ship it
            return Shipped, (self.kernel,)
        if isinstance(func, pytypes.FunctionType) and func in _arrived_with:  # shipped on: as it came
            return _shipped_def_arriving, _arrived_with[func]
        if isinstance(func, pytypes.FunctionType) and not is_library_module(func.__module__):
            digest, blob, _ = def_bytes(func)
            return _shipped_def_arriving, (snapshot(), digest, blob)
        return _kernel_arriving, (snapshot(), pickle.dumps(self.kernel))

    def __repr__(self) -> str:
        return f"Shipped({self.kernel!r})"


def _kernel_arriving(token: Token, kernel: bytes) -> Shipped:
    adopt(*token)
    return Shipped(pickle.loads(kernel))


def _shipped_def_arriving(token: Token, digest: str, blob: bytes) -> Shipped:
    return Shipped(_def_arriving(token, digest, blob))


# --- a forked child ---------------------------------------------------------------------------------------


def _forked() -> None:
    """In a forked child: a process of its own, which knows what its parent made by the parent's origins and
    ships its parent's definitions on (its root is the parent's root)."""
    global _ORIGIN
    parent_root = _root()
    for origin, obj in list(_made_here.items()):
        _origins.setdefault(obj, origin)
        _foreign.setdefault(origin, obj)
    _ORIGIN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    _adopted["root"] = parent_root


byvalue.class_reducers.append(reduce_struct_class)
context.reduce_context = reduce_context  # type: ignore[assignment]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
