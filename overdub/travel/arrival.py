"""Arrival: a snapshot adopted by the receiving process.

It compares the token's digest with the last one it adopted (one string comparison: the per-task cost when
nothing changed) and otherwise *adopts* it (:func:`adopt`): in each table, the methods whose def differs
from the one it has are defined again, those the sender has not are deleted -- through the normal
definition path, so only their dependents recompile. A process never adopts its own definitions back, but
does adopt the tables a worker made (a generic function defined in a task and returned), and never goes
back to an older snapshot of its root. Nothing raises while a task is unpickled (Dask hangs when it does):
what cannot arrive makes every launch here an error naming it (:func:`check_arrived`), and a table that
cannot be adopted has its methods dropped, with a warning.
"""

from __future__ import annotations

import os
import pickle
import warnings
from typing import cast

from .. import context, registry, world
from ..byvalue import dumps
from ..registry import GenericFunction, MethodTable
from ..runtime import runtime
from . import origins, snapshots
from .snapshots import FORMAT, Entry, Held

__all__ = ["adopt", "check_arrived"]


def adopt(root: str, digest: str, others: tuple[str, ...], blob: bytes, starting: bool = False) -> None:
    """Make this process's definitions those of the snapshot ``digest`` from ``root`` (a no-op when it is the
    one adopted last; of this process's own definitions coming back, only the tables other processes made;
    of an older snapshot of the root than the one adopted, only those too -- unless ``starting``: a task
    submitted in that world starts, and runs in it)."""
    if origins.adopted.get("digest") == digest or (root == origins.ORIGIN and not others):
        return
    # an older snapshot of the root adopted here: only the tables other processes made in it are news
    older = (
        not starting
        and root == origins.adopted.get("root")
        and origins.sequence(digest) < origins.sequence(str(origins.adopted.get("digest")))
    )
    if older and not others:
        return
    with world.lock:
        if origins.adopted.get("digest") == digest:
            return
        try:
            entries = _read_entries(blob)
        except Exception as exc:  # never raise while unpickling (Dask hangs): every launch here says why instead
            _failed["the definitions"] = f"{type(exc).__name__}: {exc}"
            runtime.reset()  # nothing compiled here launches again without check_arrived's error
            return
        _failed.pop("the definitions", None)
        mine = root == origins.ORIGIN
        for key, data in entries:  # each table on its own: one that cannot arrive leaves the others right
            owner = origins.owner_process(key)
            if (owner or root) == origins.ORIGIN or ((mine or older) and owner in (None, root)):
                continue  # this process's own definitions, or the root's as this process has them already
            _adopt_one(root, key, data)
        if not (mine or older):
            origins.adopted["digest"], origins.adopted["root"] = digest, root


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
        if origins.adopted.get((held.key, what)) != digest:
            kind, callee, value = pickle.loads(data)
            ctx.define_travelled(kind, callee, value)
            origins.adopted[(held.key, what)] = digest


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
    for sig, digest, data, *flags in entry.methods:  # flags: whether it converts (an older sender: none)
        converts = bool(flags and flags[0])
        if origins.adopted.get((entry.key, sig)) == digest:
            continue
        method = have.get(sig)
        if method is not None and (entry.key, sig) not in origins.adopted and _same_def(method.func, digest):
            origins.adopted[(entry.key, sig)] = (
                digest  # this process's own import has the sender's def (a spawned pool)
            )
            continue
        func = pickle.loads(data)
        try:
            methods = registry.methods_from(name, func, sig, full=full, converts=converts)
        except TypeError:  # a signature that did not survive pickling: its def's own annotations
            methods = registry.methods_from(name, func, None, full=full)
        for made in methods:
            table.add(made)
        origins.adopted[(entry.key, sig)] = digest
    for method in list(table.methods):
        if method.sig not in entry.signatures:
            table.remove(method.sig, "the process the work came from has no such method")
            origins.adopted.pop((entry.key, method.sig), None)


def _same_def(func: object, digest: str) -> bool:
    try:
        return snapshots.blob_digest(dumps(func)) == digest
    except Exception:  # does not pickle here: defined again from the sender's
        return False
