"""The snapshot: this process's definitions, as the token that carries them.

Every method table of the user's code -- its generic functions', the overdubs it added to contexts
(``od.CPU``'s and ``od.ALL``'s too), the methods ``od.method`` added to plain callables -- each method's def by
value (:mod:`overdub.byvalue`), each table pickled on its own (:class:`Entry`), as bytes with a digest; and
what the user's contexts hold besides tables (:class:`Held`: hooks, forwards, replacements). The *token* --
(root, digest, others, bytes) -- is cached until this process's world or something a def reads changes
(:class:`Snapshot`). A table that does not pickle is left out and recorded (:data:`unshippable`): shipping
what needs it then fails on the sender, naming why. While a snapshot is pickled on a thread
(:func:`building`), generic functions, contexts and defs in it pickle bare: the token goes beside them once.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import types as pytypes
from dataclasses import dataclass
from typing import NamedTuple, cast

from .. import context, extending, registry, world
from ..byvalue import Watch, dumps
from ..libraries import is_library_module
from ..registry import MethodTable, Signature
from ..runtime import runtime
from . import origins

__all__ = [
    "Token",
    "Entry",
    "ByName",
    "Held",
    "Snapshot",
    "FORMAT",
    "snapshot",
    "building",
    "local",
    "ships",
    "user_context",
    "where",
    "blob_digest",
    "unshippable",
]


Token = tuple[str, str, tuple[str, ...], bytes]  # (root, digest, the other processes owning tables, bytes)

# this thread's pickling: building (a snapshot, or a def's bytes, is being pickled here: what it holds goes bare),
# pinned (the definitions of a task submitted earlier, overdub.travel.tasks), task, plain (idem)
local = threading.local()


def building() -> bool:
    """Is a snapshot (or a def's bytes) being pickled on this thread: generic functions, contexts and defs bare?"""
    return bool(getattr(local, "building", False))


@dataclass(frozen=True, slots=True)
class Entry:
    """One method table in a snapshot: whose it is -- a generic function, or (context, callee) for a context's
    overdubs -- and its methods' signatures with their defs pickled (:func:`dumps`, each on its own, so an
    unchanged def is known by its bytes' digest)."""

    key: str  # the table, as the receiving process remembers what it adopted for it
    owner: object  # a GenericFunction, or (Context, callee)
    # (signature, digest of the def's bytes, the bytes, whether it converts: a numba signature's method)
    methods: tuple[tuple[Signature, str, bytes, bool], ...]
    signatures: frozenset[Signature]  # every method's, generated default-arity ones included


@dataclass(frozen=True, slots=True)
class ByName:
    """A function of an importable module, as a snapshot names a context's callee (not by value: overdub
    tables know a callee by its module and name)."""

    module: str
    qualname: str

    def __reduce__(self) -> tuple[object, ...]:
        return registry.resolve_reference, (self.module, self.qualname)


class Snapshot(NamedTuple):
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
    pinned = getattr(local, "pinned", None)
    if pinned is not None:  # a task submitted earlier, pickled now: the definitions of its submission
        return cast("Token", pinned[0])
    last = _snapshots.get("last")
    if last is not None and last.current() and last.token[0] == origins.root():
        return last.token
    with world.lock:  # no definition meanwhile
        age, read = world.current_world(), cast("list[Watch]", [])
        local.building = True
        try:
            entries = [entry for entry in map(_entry, _tables(), itertools.repeat(read)) if entry is not None]
            entries += _held(read)
            blob = dumps((FORMAT, sorted(entries)), read)
        finally:
            local.building = False
        root = origins.root()
        others = tuple(sorted({owner for owner in map(origins.owner_process, (key for key, _ in entries)) if owner}))
        others = tuple(owner for owner in others if owner != root)
        watches = {watch.key: watch for watch in read}  # each def once
        if last is not None and last.token[0] == root and last.token[2] == others and last.token[3] == blob:
            # rebuilt (the world moved, a def it read was collected) to the same bytes: the same token, so a
            # task pickled twice is the same bytes and a receiver adopts nothing new
            last = Snapshot(age, tuple(watches.values()), last.token)
            _snapshots["last"] = last
            return last.token
        # numbered by the root's count: a process given an older snapshot of the root than it has adopted
        # (a result of a worker that had not seen the latest, a Ray object put earlier) never goes back to it
        if root == origins.ORIGIN:
            _count["built"] = sequence = _count.get("built", 0) + 1
        else:
            sequence = origins.sequence(str(origins.adopted.get("digest", "0.")))
        digest = f"{sequence}.{hashlib.blake2b(blob, digest_size=16).hexdigest()}"
        last = Snapshot(age, tuple(watches.values()), (root, digest, others, blob))
        _snapshots["last"] = last
    return last.token


_count: dict[str, int] = {}  # "built": how many snapshots this process built as a root
runtime.register_cache(f"{__name__}._count", _count, kept="the numbering of this process's snapshots")


def ships(module: str | None) -> bool:
    """Are definitions made by ``module`` shipped (the user's code), rather than the same in every process
    (an installed package's, at the version the worker has too)?"""
    return not is_library_module(module)


def _tables() -> list[tuple[str, object, MethodTable]]:
    """Every method table of the user's code with methods: (key, owner, table)."""
    found: list[tuple[str, object, MethodTable]] = []
    for gf in registry.every_generic_function():
        if gf.table.methods and ships(gf.__module__):
            origin = origins.origin(gf)
            module = "__main__" if gf.__module__ == "__mp_main__" else gf.__module__
            found.append((origin or f"{module}.{gf.__qualname__}", gf, gf.table))
    owners: list[object] = [*context.every_context(), extending.user_methods]  # od.CPU's too; od.method's
    for ctx in owners:
        for callee, table in ctx.overdub_tables():  # type: ignore[attr-defined]
            if not any(ships(method.func.__module__) for method in table.methods):
                continue
            found.append((f"{where(ctx)}:{table.name}", (ctx, _by_name(callee)), table))
    return found


def _user_code(obj: object) -> bool:
    """Is ``obj`` a function, class or object of the user's code (not a string, a number, a library's)?"""
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and ships(module)


def user_context(ctx: object) -> bool:
    return isinstance(ctx, context.Context) and ships(ctx.__module__)


def where(ctx: object) -> str:
    origin = origins.origin(ctx) if user_context(ctx) else None
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
        key = f"{where(ctx)}:held"
        try:
            items = []
            for kind, callee, value in ctx.travelling():
                if not (_user_code(value) or _user_code(callee)):
                    continue  # a target's own forward or replacement, say: the same in every process
                data = dumps((kind, _by_name(callee), value), read)
                items.append((f"{kind}:{getattr(callee, '__qualname__', callee)!r}", blob_digest(data), data))
            if items:
                found.append((key, dumps(Held(key, ctx, tuple(items)), read)))
        except Exception as exc:  # a hook closing over an open file, say: the context cannot travel
            unshippable[key] = f"{type(exc).__name__}: {exc}"
        else:
            unshippable.pop(key, None)
    return found


def _entry(table_of: tuple[str, object, MethodTable], read: list[Watch]) -> tuple[str, bytes] | None:
    """The snapshot's entry of a table, pickled on its own (so one that cannot arrive leaves the others right),
    or None (recorded in ``unshippable``) where something in it does not pickle: a def closing over a lock,
    say."""
    key, owner, table = table_of
    try:
        methods = []
        for method in table.methods:
            if not method.generated:  # its def defines it again
                data = dumps(method.func, read)
                methods.append((method.sig, blob_digest(data), data, method.converts))
        data = dumps(Entry(key, owner, tuple(methods), frozenset(m.sig for m in table.methods)), read)
    except Exception as exc:  # whatever pickling raises: this table does not travel
        unshippable[key] = f"{type(exc).__name__}: {exc}"
        return None
    unshippable.pop(key, None)
    return key, data


def blob_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


unshippable: dict[str, str] = {}  # key -> why its table does not travel
runtime.register_cache(f"{__name__}.unshippable", unshippable)
