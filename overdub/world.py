"""World age, backedges and invalidation (Julia's gf.c, in miniature).

Every change to a method table bumps the *world* counter. Everything overdub caches -- a dispatch result, a
compiled method instance, a compiled kernel -- is a :class:`Node`. A node records the nodes it consulted by
giving each of them a *backedge* to itself; when a consulted node's answer changes, :func:`invalidate` walks
those backedges and marks every node reachable from it invalid, and nothing else. A cached thing is then
checked for validity by reading one flag: no launch ever walks edges.

Each invalidation is appended to a bounded log with its cause, so "why did this recompile" has an answer.

Thread safety: one re-entrant lock, :data:`lock`, serialises every change of a method table, every fill of
a dispatch cache and every invalidation walk. Readers of a cache take no lock: they read a dict entry and a
flag, both of which are replaced atomically under the GIL. A compile that races a redefinition is safe
because backedges are added as the compile consults things, not at its end: a node invalidated while it is
still being built is born invalid and is rebuilt on its next use.
"""
from __future__ import annotations

import collections
import contextlib
import threading
from dataclasses import dataclass, field

lock = threading.RLock()
_world = 0
_log: collections.deque = collections.deque(maxlen=1000)
_consulting = threading.local()


def current_world() -> int:
    """The current world age: the number of method-table changes so far."""
    return _world


def bump_world() -> int:
    """Advance the world age; called (under :data:`lock`) by every method-table change."""
    global _world
    with lock:
        _world += 1
        return _world


class Node:
    """A cached result that stays valid until something it consulted changes.

    Subclasses describe themselves (``describe``) and drop themselves from their cache in ``on_invalidate``.
    """

    __slots__ = ("valid", "world", "edges", "_backedges", "__weakref__")

    def __init__(self):
        self.valid = True
        self.world = _world          # the world this node was made in
        self.edges: dict[Node, None] = {}  # what this node consulted, in order (for od.explain)
        self._backedges: set[Node] = set()

    def add_backedge(self, dependent: "Node") -> None:
        """Record that ``dependent`` was built from this node's answer."""
        if dependent is self:
            return
        with lock:
            if self.valid:
                self._backedges.add(dependent)
            else:                   # consulted something already stale: the dependent is stale too
                dependent.valid = False

    def dependents(self) -> list["Node"]:
        return list(self._backedges)

    def on_invalidate(self, cause: str) -> None:
        """Hook: remove this node from whatever cache holds it."""

    def describe(self) -> str:
        return repr(self)


@dataclass(frozen=True)
class Invalidation:
    """One entry of the invalidation log: what changed, and what it made stale."""
    cause: str
    world: int
    invalidated: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        lines = [f"{self.cause} (world {self.world}) invalidated:"]
        lines += [f"  {item}" for item in self.invalidated]
        return "\n".join(lines)


def invalidate(roots, cause: str) -> Invalidation | None:
    """Mark ``roots`` and everything reachable from them through backedges invalid; log it with ``cause``."""
    with lock:
        stack = [node for node in roots if node.valid]
        order: list[Node] = []
        while stack:
            node = stack.pop()
            if not node.valid:
                continue
            node.valid = False
            order.append(node)
            stack.extend(node._backedges)
            node._backedges.clear()
        for node in order:
            node.on_invalidate(cause)
        if not order:
            return None
        entry = Invalidation(cause, _world, tuple(node.describe() for node in order))
        _log.append(entry)
        return entry


def invalidation_log() -> list[Invalidation]:
    """The most recent invalidations, oldest first (at most 1000 are kept)."""
    with lock:
        return list(_log)


# --- edge recording -------------------------------------------------------------------------------------

def _stack() -> list[Node]:
    stack = getattr(_consulting, "stack", None)
    if stack is None:
        stack = _consulting.stack = []
    return stack


@contextlib.contextmanager
def building(node: Node):
    """While ``node`` is being built on this thread, everything :func:`consult`-ed becomes its edge."""
    stack = _stack()
    stack.append(node)
    try:
        yield node
    finally:
        stack.pop()


def consult(node: Node) -> None:
    """Record that the node being built on this thread (if any) depends on ``node``."""
    stack = _stack()
    if stack:
        builder = stack[-1]
        node.add_backedge(builder)
        builder.edges[node] = None


def being_built() -> Node | None:
    """The innermost node being built on this thread, if any."""
    stack = _stack()
    return stack[-1] if stack else None
