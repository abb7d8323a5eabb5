"""A task as an engine pickles it: a def of the user's code, a pinned task, a task that is no def.

:func:`reduce_def` is how an engine's pickler ships a def of the user's code: by value with the token where
it reaches overdub or numba, else as the engine would, with the token first (plain code keeps its module's
state). An engine that pickles later than the submission (a pool's task thread) holds the task's function as
:class:`Pinned`: pickled with the definitions of the moment it was submitted, for the rest of that task's
pickle (:func:`pickling_task`). A bound method, class method or callable instance of the user's code ships as
the engine would, with the token first (:func:`reduce_task_object`).
"""

from __future__ import annotations

import pickle
import types as pytypes
from collections.abc import Callable

from .. import byvalue
from . import arrival, defs, snapshots
from .snapshots import Token

__all__ = ["reduce_def", "Pinned", "pickling_task", "reduce_task_object"]


def reduce_def(func: pytypes.FunctionType) -> tuple[object, ...] | None:
    """How an engine's pickler ships a def of the user's code: by value with the token where it reaches
    overdub or numba; None (as the engine would, by reference or by cloudpickle's value) for one that does
    not -- plain code (a pool's initializer and the task reading what it set) keeps its own module's state."""
    if snapshots.building():
        return None  # inside a snapshot or a def's bytes: Shipper ships it
    if getattr(snapshots.local, "plain", None) is func:  # the def a _Plain holds: as the engine ships it
        snapshots.local.plain = None
        return None
    pinned = getattr(snapshots.local, "pinned", None)
    if pinned is not None and pinned[2] is func:  # the function of a task submitted earlier: as it was then
        digest, blob, reaching = pinned[1]
    elif func in defs.arrived_with:  # shipped on (a Dask scheduler): as it came
        return defs.def_arriving, defs.arrived_with[func]
    else:
        try:
            digest, blob, reaching = defs.def_bytes(func)
        except byvalue.Unshippable as exc:
            if exc.reaches:  # code of overdub's that cannot travel: said here, on the sender, naming it
                raise pickle.PicklingError(f"cannot ship {func.__qualname__} to another process: {exc}") from exc
            digest, blob, reaching = "", b"", False  # plain code the engine ships as it did (a lock by name)
    if not reaching:  # plain code keeps its engine's semantics (its module's globals are the worker's own),
        # and brings the token: it may call what arrived before
        return _with_token, (snapshots.snapshot(), _Plain(func))
    return defs.def_arriving, (snapshots.snapshot(), digest, blob)


class Pinned:
    """A task's function as an engine that pickles later than the submission holds it (a pool's task thread):
    pickled with the definitions of the moment it was submitted -- the token and its def's bytes then, for
    everything the task's pickle holds."""

    __slots__ = ("func", "pin")

    def __init__(self, func: object) -> None:
        self.func = func
        reached = func if type(func) is pytypes.FunctionType and snapshots.ships(func.__module__) else None
        try:
            shipped = None if reached is None else defs.def_bytes(reached)
        except byvalue.Unshippable:  # said as the engine pickles it (reduce_def)
            shipped = reached = None
        self.pin = (snapshots.snapshot(), shipped, reached)

    def __call__(self, *args: object, **kwargs: object) -> object:  # a pool of threads calls it here
        return self.func(*args, **kwargs)  # type: ignore[operator]

    def __reduce__(self) -> tuple[object, ...]:
        if getattr(snapshots.local, "task", False):  # for the rest of this task's pickle (pickling_task)
            snapshots.local.pinned = self.pin
        return _itself, (self.func,)


def pickling_task(dumps: Callable[[object, int | None], bytes], obj: object, protocol: int | None) -> bytes:
    """``dumps(obj, protocol)``: a pool's pickle of one task, during which a :class:`Pinned` function pins the
    definitions; after it, they are this process's again."""
    snapshots.local.task = True
    try:
        return dumps(obj, protocol)
    finally:
        snapshots.local.task = False
        snapshots.local.pinned = None


class _Plain:
    """A def of plain code (or a task that is a method or an instance of the user's code) as its engine ships
    it (by reference, or cloudpickle's by value), within a pickle that brings the token first."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __reduce__(self) -> tuple[object, ...]:
        snapshots.local.plain = self.value  # the pickler saves it next: reduce_def lets the engine's reduce take it
        return _itself, (self.value,)


def reduce_task_object(obj: object) -> tuple[object, ...] | None:
    """How an engine's pickler ships a bound method, a class method or a callable instance (a ``Process``
    subclass's too) of the user's code -- a task that is no def: as it did, with the token first (its code
    calls the user's definitions, which must be the sender's). None: as the engine would."""
    if snapshots.building() or getattr(snapshots.local, "plain", None) is obj:
        snapshots.local.plain = None
        return None
    return _with_token, (snapshots.snapshot(), _Plain(obj))


def _itself(value: object) -> object:
    return value


def _with_token(token: Token, value: object) -> object:
    arrival.adopt(*token)
    return value
