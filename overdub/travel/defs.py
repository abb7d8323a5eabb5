"""Defs by value: the work's own code, each def of the user's code that reaches overdub or numba, pickled
with what it reads and the token, and made again on arrival.

:func:`def_bytes` pickles a def without the snapshot (which travels beside it, as it changes on its own),
cached until something the pickle read changes. On arrival (:func:`def_arriving`) the first def that came
with these bytes is reused (:mod:`overdub.travel.interning`); in the process that sent it, the def itself.
A def submitted in another world than it came with is an *arrival copy* of its own, which ships on with that
world's token (:data:`arrived_with`). A def that cannot be made here arrives as one raising why, when
called. The defs launched as kernels here (:func:`note_kernel`) ship by value wherever a pickle meets them.
"""

from __future__ import annotations

import os
import pickle
import types as pytypes
import weakref
from typing import cast

from .. import byvalue
from ..byvalue import Watch, arrived_by_value
from ..runtime import runtime
from . import arrival, interning, origins, snapshots
from .snapshots import Token

__all__ = ["note_kernel", "def_bytes", "def_arriving", "arrived_with", "token_of"]


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
        building, snapshots.local.building = snapshots.building(), True
        try:
            blob, reaches = byvalue.dumps_noting(func, read)
        finally:
            snapshots.local.building = building
        digest = "shipped-" + snapshots.blob_digest(blob)
        cached = _def_blobs[func] = (tuple(read), digest, blob, reaches or func in _kernels)
        _sent[digest] = func
    return cached[1], cached[2], cached[3]


_sent: weakref.WeakValueDictionary[str, pytypes.FunctionType] = weakref.WeakValueDictionary()  # digest -> def
runtime.register_cache(f"{__name__}._sent", _sent)


def def_arriving(token: Token, def_digest: str, blob: bytes) -> pytypes.FunctionType:
    """A def shipped as :func:`def_bytes`: the first def that arrived with these bytes, else these bytes
    unpickled (after the snapshot, whose generic functions the def names) -- or, in the process that sent it
    (a Dask scheduler or worker of this process), the def itself. Submitted in a world other than the one
    that def came with, a copy of its own, which ships on with that world's token. Never raises: a def that
    cannot be made here arrives as one raising why, when called."""
    arrival.adopt(*token)
    if token[0] == origins.ORIGIN:
        found = _sent.get(def_digest)
        if found is not None:
            return _copy_arrived(found, token, def_digest, blob)  # (which ships on as it came)
    found = interning.by_content.get(def_digest)
    if found is not None and (not interning.recent or interning.recent[-1] is not found):
        interning.recent.append(found)
    if found is None:
        try:
            made = interning.interned(pickle.loads(blob))
        except Exception as exc:  # a module only the sender has, say
            return _failing(f"{type(exc).__name__}: {exc}")
        found = interning.by_content.setdefault(def_digest, made)
        interning.recent.append(found)
        arrived_with[found] = (token, def_digest, blob)
        values = {name: value for name, value in found.__globals__.items() if not name.startswith("__")}
        _def_blobs.setdefault(found, ((Watch(found, values),), def_digest, blob, True))  # (its bytes as it came)
    if arrived_with.get(found, (token,))[0][1] != token[1]:  # submitted in another world than it came with
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
        arrived_with[copy] = (token, def_digest, blob)
        if len(_copies) > 256:  # the worlds of tasks in flight: a few
            _copies.clear()
        _copies[(def_digest, token[1])] = copy
    return copy


# a def that arrived by value -> what it came with, (token, digest, bytes): it ships on so; (def, world) -> copy
arrived_with: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[Token, str, bytes]] = weakref.WeakKeyDictionary()
_copies: dict[tuple[str, str], pytypes.FunctionType] = {}
runtime.register_cache(f"{__name__}.arrived_with", arrived_with, kept="the definitions each def came with: a fact")
runtime.register_cache(f"{__name__}._copies", _copies)


def token_of(func: object) -> Token | None:
    """The token a def that arrived by value came with (the definitions of its submission), else None."""
    arrived = arrived_with.get(func) if isinstance(func, pytypes.FunctionType) else None
    return None if arrived is None else arrived[0]


def _failing(why: str) -> pytypes.FunctionType:
    message = f"overdub: code sent to this process (pid {os.getpid()}) could not be made here: {why}"

    def failed(*args: object, **kwargs: object) -> None:
        raise RuntimeError(message)

    failed.__overdub_not_arrived__ = message  # type: ignore[attr-defined]  # od.cuda of it raises this first
    return cast("pytypes.FunctionType", failed)
