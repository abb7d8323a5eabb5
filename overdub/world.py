"""World age, backedges and invalidation (Julia's gf.c, in miniature).

Every change that can alter what compiled code means -- a method-table change, a rebound global -- bumps the
*world* counter. Everything overdub caches -- a dispatch answer, a compiled method instance, a compiled
kernel, a global's value -- is a :class:`Node`, valid for a range of worlds: from the world it was made in
(``min_world``) until it is invalidated (``max_world``; None while it is still valid). A node records the nodes
it consulted (its *edges*) and gives each of them a *backedge* to itself; when a consulted node's answer
changes, :func:`invalidate` walks those backedges and marks every node reachable from it invalid, and nothing
else. A cached thing is checked for validity by reading one flag: no launch ever walks edges.

A node that is invalidated, or retired because what it was compiled from no longer exists, is detached: it
leaves the backedge sets of the nodes it consulted and drops its own edges, so nothing live keeps it (and the
code it holds) alive.

Each invalidation is appended to a bounded log with its cause and world, so "why did this recompile" has an
answer.

Thread safety: one re-entrant lock, :data:`lock`, serialises every change of a method table, every fill of
a dispatch cache and every invalidation walk. Readers of a cache take no lock: they read a dict entry and a
flag, both of which are replaced atomically under the GIL. A compile that races a redefinition is safe
because backedges are added as the compile consults things, not at its end: a node invalidated while it is
still being built is born invalid and is rebuilt on its next use.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

lock = threading.RLock()
_world = 0
_log: collections.deque[Invalidation] = collections.deque(maxlen=1000)
_consulting = threading.local()


def current_world() -> int:
    """The current world age: the number of changes to method tables and globals that compiled code read."""
    return _world


def bump_world() -> int:
    """Advance the world age; called by every change that may invalidate compiled code."""
    global _world
    with lock:
        _world += 1
        return _world


class Node:
    """A cached result that stays valid until something it consulted changes.

    Subclasses describe themselves (``describe``) and drop themselves from their cache in ``on_invalidate``.
    """

    __slots__ = ("valid", "min_world", "max_world", "edges", "_backedges", "__weakref__")

    def __init__(self) -> None:
        self.valid = True
        self.min_world = _world  # the first world this node is valid in
        self.max_world: int | None = None  # the last one, once invalidated
        self.edges: dict[Node, None] = {}  # what this node consulted, in order (for od.explain)
        self._backedges: set[Node] = set()

    def add_backedge(self, dependent: Node) -> None:
        """Record that ``dependent`` was built from this node's answer."""
        if dependent is self or not dependent.valid:
            return
        with lock:
            if self.valid:
                self._backedges.add(dependent)
            else:  # consulted something already stale: the dependent is stale too
                dependent.valid = False

    def dependents(self) -> list[Node]:
        return list(self._backedges)

    def detach(self) -> None:
        """Leave the backedge sets of everything this node consulted and forget its edges."""
        with lock:
            for consulted in self.edges:
                consulted._backedges.discard(self)
            self.edges = {}

    def worlds(self) -> str:
        """The node's world range, as Julia prints it: ``5:∞`` while valid, ``5:8`` once invalidated."""
        return f"{self.min_world}:{'∞' if self.max_world is None else self.max_world}"

    def on_invalidate(self, cause: str) -> None:
        """Hook: remove this node from whatever cache holds it."""

    def describe(self) -> str:
        return repr(self)


@dataclass(frozen=True)
class Invalidation:
    """One entry of the invalidation log: what changed, in which world, and what it made stale (each with the
    world range it had been valid for)."""

    cause: str
    world: int
    invalidated: tuple[str, ...] = field(default=())
    worlds: tuple[str, ...] = field(default=())  # the world range each of them had been valid for
    # for each of them, the index of the one whose invalidation reached it through a backedge (-1: a root)
    parents: tuple[int, ...] = field(default=())
    # overdub's own doing (a target's meaning of names set up, a module of overdub's imported), not the user's
    internal: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        lines = [f"{self.cause} (world {self.world}) invalidated:"]
        lines += [f"  {item}  [worlds {worlds}]" for item, worlds in zip(self.invalidated, self.worlds)]
        return "\n".join(lines)


def invalidate(roots: Iterable[Node], cause: str, internal: bool = False) -> Invalidation | None:
    """Mark ``roots`` and everything reachable from them through backedges invalid as of the current world
    (the change that causes it has bumped the world already); log it with ``cause`` -- as overdub's own doing
    where ``internal`` says so or an import of overdub's code made the change (:func:`_importing_overdub`)."""
    internal = internal or _importing_overdub()
    with lock:
        stack = [(node, -1) for node in roots if node.valid]
        order: list[Node] = []
        parents: list[int] = []
        while stack:
            node, parent = stack.pop()
            if not node.valid:
                continue
            node.valid = False
            node.max_world = _world - 1
            order.append(node)
            parents.append(parent)
            stack.extend((dependent, len(order) - 1) for dependent in node._backedges)
            node._backedges.clear()
        for node in order:
            node.on_invalidate(cause)
        entry = Invalidation(
            cause,
            _world,
            tuple(node.describe() for node in order),
            tuple(node.worlds() for node in order),
            tuple(parents),
            internal,
        )
        for node in order:
            node.detach()
        if not order:
            return None
        _log.append(entry)
        return entry


def retire(nodes: Iterable[Node]) -> None:
    """Drop nodes whose source no longer exists (a collected kernel function, a cache reset): invalid, detached,
    and not logged -- nothing changed meaning, so nothing recompiles because of it."""
    with lock:
        for node in nodes:
            if node.valid:
                node.valid = False
                node.max_world = _world
            node.detach()


def invalidation_log(internal: bool = False) -> list[Invalidation]:
    """The most recent invalidations, oldest first (at most 1000 are kept): those the user's definitions and
    rebindings caused; ``internal=True`` adds overdub's own (its targets setting up what names mean there)."""
    with lock:
        return [entry for entry in _log if internal or not entry.internal]


def _importing_overdub() -> bool:
    """Is the change being made by a module of overdub's as it is imported (a target's package, a post-import
    hook)? Read off the stack: an import machinery frame reached before any frame of code outside overdub."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("importlib") or frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        if module != "overdub" and not module.startswith("overdub."):
            return False
        frame = frame.f_back  # type: ignore[assignment]  # None ends the walk
    return False


# --- edge recording -------------------------------------------------------------------------------------


def _stack() -> list[Node]:
    stack = getattr(_consulting, "stack", None)
    if stack is None:
        stack = _consulting.stack = []
    return stack


@contextlib.contextmanager
def building(node: Node) -> Iterator[Node]:
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
