"""Defs interned by content: a def arriving by value is a new function object in each task;
:func:`interned` maps it to the first one with the same content (code, defaults, closure and everything it
reads, transitively: :func:`overdub.embedded.embedded_digest`), so a worker compiles a definition once. The
first def of a content is held while anything holds it: the tasks running it, and the last few defs that
arrived (:data:`recent`), so a worker running one task after another keeps its kernel compiled between them.
"""

from __future__ import annotations

import collections
import types as pytypes
import weakref

from .. import bindings, world
from ..byvalue import arrived_by_value
from ..digests import Uncacheable
from ..embedded import embedded_digest
from ..runtime import runtime

__all__ = ["interned", "by_content", "recent"]


# content digest -> the first def of that content, while anything holds it: the tasks running it, and the last
# few defs that arrived (a worker running one task after another keeps its kernel compiled between them)
by_content: weakref.WeakValueDictionary[str, pytypes.FunctionType] = weakref.WeakValueDictionary()
recent: collections.deque[pytypes.FunctionType] = collections.deque(maxlen=8)
runtime.register_cache(f"{__name__}.recent", recent)
# a def -> (the def it is interned to, its namespace's version tag then)
# (held weakly both ways: an entry naming its own key would keep it alive)
_interned_by_id: weakref.WeakKeyDictionary[pytypes.FunctionType, tuple[weakref.ref[pytypes.FunctionType], int]] = (
    weakref.WeakKeyDictionary()
)
runtime.register_cache(f"{__name__}.by_content", by_content)
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
            canonical = by_content.setdefault(digest, func)
        _interned_by_id[func] = (weakref.ref(canonical), version)
    return canonical
