"""Edges on mutable Python state: module globals, closure cells, and a function's own code and defaults.

A compiled thing stays valid only while everything it read keeps its value: each global it named (a
:class:`Binding`), each closure cell of each function it compiled (a :class:`CellBinding`), and each such
function's ``__code__``, ``__defaults__`` and ``__kwdefaults__`` (a :class:`FunctionState`; what IPython's
``%autoreload`` replaces in place). Each is a :mod:`overdub.world` node, an edge of whatever read it.

Python has no hook on any of these that works on every supported version (dict and function watchers are
3.12+ and C-only), so overdub uses the two-level check GPUCompiler uses for world ages. Each edge names one
machine word that moves whenever what it depends on may have changed: a namespace dict's *version tag*
(PEP 509's ``ma_version_tag``, bumped by every change of the dict), a cell's content pointer, a function's
code, defaults and keyword-defaults pointers. A :class:`Guard` records each word with the value it had: the
fast check compares them, one integer read each, no walk over edges. When a word moved -- some global of
that module changed, maybe an unrelated one; a cell or a function field was assigned, maybe an equal value
-- the slow check compares the edges watching that word with what they recorded, invalidates the ones that
really changed (and, through backedges, everything built from them), and records the word's new value.

What counts as a change: identity, except for values equal as data (re-executing ``N = 2.5`` or ``K = (1,
2)``), where equal means the same bits (``0.0`` and ``-0.0`` differ; a ``nan`` equals itself), and code
objects, which compare by content (re-executing an unchanged ``def`` is no change).

The word offsets are found by probing objects at import; where that fails (an interpreter laid out
otherwise) or where dicts carry no version tag (Python 3.14+), every check of such a word is the slow one.
Each edge holds the objects whose address it recorded, so an address cannot be reused while it is watched;
it holds a function only weakly (a kernel's cache entry must die with its function), which is safe because
a compiled thing is only ever checked while the functions it read are alive.
"""

from __future__ import annotations

import builtins
import ctypes
import hashlib
import struct
import sys
import types as pytypes
import weakref
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, TypeVar, cast

import numpy as np

from . import world
from .runtime import runtime

try:
    from ._fastlaunch import plan_key as plan_key
    from ._fastlaunch import words_fresh as words_fresh
except ImportError:  # built without a C compiler: Guard.fresh reads each word in Python, the drop-in its plan key
    words_fresh = None  # type: ignore[assignment]  # mypy types a function, not "the function or None"
    plan_key = None  # type: ignore[assignment]

_MISSING = object()
_WORD = ctypes.sizeof(ctypes.c_void_p)
# PyDictObject: PyObject_HEAD (refcount, type), Py_ssize_t ma_used, uint64_t ma_version_tag.
_VERSION_OFFSET = 3 * _WORD
_HAS_VERSION_TAG = sys.version_info < (3, 14)
_UNSEEN = 2**64 - 1  # a word value no pointer or version tag takes
_PAIR = struct.Struct("=QQ")  # a (watched word, expected value) address pair of Guard.words


def version_tag_address(namespace: dict[Any, Any]) -> int:
    """The address of ``namespace``'s version tag (PEP 509: every insertion and removal changes it), or 0 where
    the interpreter has none."""
    return id(namespace) + _VERSION_OFFSET if _HAS_VERSION_TAG else 0


def valid_slot_offset() -> int:
    """Where a :class:`world.Node` keeps its ``valid`` flag (the slot's offset in the object, for native launch
    functions to read it in place), or 0 where it cannot be found."""
    node = world.Node()
    first, second = object(), object()
    probed: Any = node  # the probe stores objects that are not bools in the slot, to find it
    probed.valid = first
    offset = _probe(node, first)
    probed.valid = second
    found = offset is not None and ctypes.c_size_t.from_address(id(node) + offset).value == id(second)
    return offset if found and offset is not None else 0


def _probe(obj: object, value: object) -> int | None:
    """The offset of the word in ``obj``'s memory that points to ``value`` (searched past the header)."""
    for offset in range(2 * _WORD, 24 * _WORD, _WORD):
        if ctypes.c_size_t.from_address(id(obj) + offset).value == id(value):
            return offset
    return None


def _function_offsets() -> tuple[int, int, int] | None:
    """Offsets of a function's code, defaults and kwdefaults pointers, checked by assigning each."""

    def probe(a: int = 1, *, b: int = 2) -> int:
        return a + b

    fields = ("__code__", "__defaults__", "__kwdefaults__")
    code, defaults, kwdefaults = (_probe(probe, getattr(probe, name)) for name in fields)
    if code is None or defaults is None or kwdefaults is None or len({code, defaults, kwdefaults}) != 3:
        return None
    offsets = (code, defaults, kwdefaults)
    probe.__code__, probe.__defaults__, probe.__kwdefaults__ = (lambda a=3, *, b=4: a).__code__, (5,), {"b": 6}
    moved = all(
        ctypes.c_size_t.from_address(id(probe) + o).value == id(getattr(probe, n)) for o, n in zip(offsets, fields)
    )
    return offsets if moved else None


def _cell_offset() -> int | None:
    value = object()
    cell = pytypes.CellType(value)
    offset = _probe(cell, value)
    if offset is None:
        return None
    cell.cell_contents = replacement = object()
    return offset if ctypes.c_size_t.from_address(id(cell) + offset).value == id(replacement) else None


_FUNCTION_OFFSETS = _function_offsets()
_CELL_OFFSET = _cell_offset()


def word_view(obj: object, offset: int | None) -> ctypes.c_uint64 | None:
    """A live view (``.value``) of one machine word of ``obj``, or None where its offset is unknown."""
    if offset is None:
        return None
    return ctypes.c_uint64.from_address(id(obj) + offset)


def version_view(namespace: dict[str, Any]) -> ctypes.c_uint64 | None:
    """A live view of the namespace dict's version tag (``.value``), or None where there is none."""
    return word_view(namespace, _VERSION_OFFSET if _HAS_VERSION_TAG else None)


def dict_version(namespace: dict[str, Any]) -> int:
    """The namespace dict's version tag (0 where the interpreter has none: always take the slow path)."""
    view = version_view(namespace)
    return 0 if view is None else view.value


def same_value(a: Any, b: Any) -> bool:
    """Is ``b`` the same as ``a`` for compiled code that captured ``a`` as a constant?"""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) is complex:
        return same_value(a.real, b.real) and same_value(a.imag, b.imag)
    if type(a) is tuple:
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, np.generic) and not isinstance(a, np.object_):
        return bool(a.dtype == b.dtype and a.tobytes() == b.tobytes())
    if type(a) is pytypes.CodeType:
        return bool(a == b)
    return type(a) in (int, bool, str, bytes) and a == b


def lookup(namespace: dict[str, Any], name: str, with_builtins: bool = True) -> object:
    """What ``name`` means in a function whose globals are ``namespace``: a global, else (``with_builtins``)
    a builtin. A module's attribute is looked up without builtins: ``math.max`` does not exist."""
    value = namespace.get(name, _MISSING)
    if value is _MISSING and with_builtins:
        value = getattr(builtins, name, _MISSING)
    return value


# --- the edges ------------------------------------------------------------------------------------------


Word = tuple[ctypes.c_uint64 | None, int]
"""A watched machine word: its live view (None where there is none: always the slow check), and its value."""


class Edge(world.Node):
    """A node recording a piece of Python state: ``changed()`` says whether it still holds, ``words()`` the
    machine words (view, value when read) that move whenever it may have changed."""

    __slots__ = ()

    def changed(self) -> bool:
        raise NotImplementedError

    def words(self) -> list[Word]:
        raise NotImplementedError

    def cause(self) -> str:
        return f"{self.describe()} changed"


class Binding(Edge):
    """The value ``name`` had in ``namespace`` when something read it."""

    __slots__ = ("namespace", "name", "value", "seen_version", "with_builtins")

    def __init__(
        self, namespace: dict[str, Any], name: str, value: object, seen_version: int, with_builtins: bool
    ) -> None:
        super().__init__()
        self.namespace, self.name, self.value = namespace, name, value
        self.seen_version = seen_version  # the dict's version tag just before the value was read
        self.with_builtins = with_builtins

    def changed(self) -> bool:
        return not same_value(self.value, lookup(self.namespace, self.name, self.with_builtins))

    def words(self) -> list[Word]:
        return [(version_view(self.namespace), self.seen_version)]

    def on_invalidate(self, cause: str) -> None:
        key = (id(self.namespace), self.name, self.with_builtins)
        if runtime.bindings.get(key) is self:
            del runtime.bindings[key]

    def describe(self) -> str:
        return f"global {self.namespace.get('__name__', '?')}.{self.name}"

    def cause(self) -> str:
        return f"{self.describe()} rebound"


class CellBinding(Edge):
    """The value a closure cell of ``owner`` (a function's qualified name) held when something read it."""

    __slots__ = ("cell", "value", "label")

    def __init__(self, cell: pytypes.CellType, value: object, label: str) -> None:
        super().__init__()
        self.cell, self.value, self.label = cell, value, label

    def changed(self) -> bool:
        try:
            return not same_value(self.value, self.cell.cell_contents)
        except ValueError:  # emptied (del of the captured variable)
            return True

    def words(self) -> list[Word]:
        return [(word_view(self.cell, _CELL_OFFSET), id(self.value))]

    def on_invalidate(self, cause: str) -> None:
        if runtime.cells.get(id(self.cell)) is self:
            del runtime.cells[id(self.cell)]

    def describe(self) -> str:
        return f"captured variable {self.label}"

    def cause(self) -> str:
        return f"{self.describe()} reassigned"


class FunctionState(Edge):
    """A function's ``__code__``, ``__defaults__`` and ``__kwdefaults__`` when something compiled it (the
    function itself is held weakly)."""

    __slots__ = ("function", "state", "label")

    def __init__(self, func: pytypes.FunctionType) -> None:
        super().__init__()
        self.function = weakref.ref(func)
        self.state = (func.__code__, func.__defaults__, func.__kwdefaults__)
        self.label = f"{func.__module__}.{func.__qualname__}"

    def changed(self) -> bool:
        """Was the function's code or defaults replaced? Not where it was collected: nothing can replace them
        then. (A function made anew at each typing -- an ``@overload``'s ``impl`` closure, which numba drops
        once inlined -- dies as soon as the kernel is compiled; taken for a change, each launch compiled the
        kernel again, without end.) What rebinds its name is its binding's edge."""
        func = self.function()
        return func is not None and not all(
            map(same_value, self.state, (func.__code__, func.__defaults__, func.__kwdefaults__))
        )

    def words(self) -> list[Word]:
        func = self.function()
        offsets = _FUNCTION_OFFSETS if func is not None and _FUNCTION_OFFSETS else (None, None, None)
        return [(word_view(func, offset), id(value)) for offset, value in zip(offsets, self.state)]

    def on_invalidate(self, cause: str) -> None:
        if runtime.functions.get(self.function) is self:
            del runtime.functions[self.function]

    def describe(self) -> str:
        return f"code of {self.label}"

    def cause(self) -> str:
        return f"the code or defaults of {self.label} replaced in place"


class ArrayContents(Edge):
    """A host array a target froze into compiled code as a constant (numba-cuda copies a global numpy array
    into the module's constant memory), with a digest of its contents then. An in-place change moves no word a
    launch could compare, so a kernel holding one is checked at every launch (its launches take the Python
    path and hash the array: about a microsecond for a lookup table of a few KiB); a changed array invalidates
    the kernel and the next launch compiles its new contents. Never silently stale."""

    __slots__ = ("array", "digest", "label")

    def __init__(self, array: np.ndarray[Any, Any], label: str) -> None:
        super().__init__()
        self.array, self.label = array, label  # held: the id keying this edge stays the array's
        self.digest = contents_digest(array)

    def changed(self) -> bool:
        return contents_digest(self.array) != self.digest

    def words(self) -> list[Word]:
        return [(None, 0)]  # no word to watch: checked at every launch

    def on_invalidate(self, cause: str) -> None:
        if runtime.arrays.get(id(self.array)) is self:
            del runtime.arrays[id(self.array)]

    def describe(self) -> str:
        return f"contents of the array {self.label}"

    def cause(self) -> str:
        return f"the array {self.label} was changed in place"


def contents_digest(array: np.ndarray[Any, Any]) -> bytes:
    """A digest of an array's dtype, shape and contents (without a copy where it is C-contiguous)."""
    data = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    digest = hashlib.blake2b(f"{array.dtype.str}{array.shape}".encode(), digest_size=16)
    digest.update(data.data.cast("B"))
    return digest.digest()


def invalidate_changed(edges: Iterable[Edge]) -> None:
    """Invalidate edges whose state changed: a new world, as a method-table change is."""
    world.bump_world()
    for edge in edges:
        world.invalidate([edge], edge.cause())


def _record(edge: Edge) -> None:
    world.consult(edge)
    builder = world.being_built()
    if isinstance(builder, Guarded):
        builder.guard.add(edge)


_K = TypeVar("_K")
_E = TypeVar("_E", bound=Edge)


def _consult(table: MutableMapping[_K, world.Node], key: _K, make: Callable[[], _E]) -> _E:
    """The edge under ``key`` in ``table``, made anew (and the old one invalidated, with what used it) when its
    state changed, recorded as an edge of the node being built."""
    with world.lock:
        edge = cast("_E | None", table.get(key))  # the table holds the edges ``make`` makes
        if edge is not None and edge.changed():
            invalidate_changed([edge])
            edge = None
        if edge is None:
            edge = make()
            table[key] = edge
        _record(edge)
    return edge


def read(namespace: dict[str, Any], name: str, with_builtins: bool = True) -> object:
    """Read a global (or, without builtins, a module's attribute) for a compile: returns its value, or
    ``_MISSING``, and makes it an edge of the node being built."""
    seen_version = dict_version(namespace)
    value = lookup(namespace, name, with_builtins)
    return _consult(
        runtime.bindings,
        (id(namespace), name, with_builtins),
        lambda: Binding(namespace, name, value, seen_version, with_builtins),
    ).value


def read_attribute(module: pytypes.ModuleType, name: str) -> object:
    """Read a module's attribute for a compile, as :func:`read` does (an edge; ``_MISSING`` where it has none).
    A lazy attribute -- computed by the module's ``__getattr__`` (PEP 562) -- is asked for first where the
    module's globals lack it: one the module then keeps in its globals (``overdub.cuda`` does) is read as any
    global; one it computes at each read is returned with no edge (it is no binding)."""
    namespace = vars(module)
    if name not in namespace and not name.startswith("__") and callable(namespace.get("__getattr__")):
        try:
            value = getattr(module, name)
        except AttributeError:
            return _MISSING
        if name not in namespace:
            return value
    return read(namespace, name, with_builtins=False)


def read_cell(cell: pytypes.CellType, label: str) -> object:
    """Read a closure cell for a compile (raises ValueError when it is empty); an edge like a global."""
    value = cell.cell_contents
    return _consult(runtime.cells, id(cell), lambda: CellBinding(cell, value, label)).value


def read_array(array: np.ndarray[Any, Any], label: str) -> None:
    """Make the contents of ``array``, frozen into the node being built as a constant, an edge of it."""
    _consult(runtime.arrays, id(array), lambda: ArrayContents(array, label))


def read_function(func: pytypes.FunctionType) -> None:
    """Make ``func``'s code and defaults, as they are now, an edge of the node being built."""
    _consult(runtime.functions, weakref.ref(func), lambda: FunctionState(func))


# --- the check ------------------------------------------------------------------------------------------


class Guard:
    """The state a compiled thing read (directly or through what it calls), checked cheaply before use.

    Each watched word has an entry ``[view, expected, rebinds]``, ``expected`` a ``ctypes.c_uint64`` holding the
    value the word had when last checked, so that native code compares two words in memory: the targets' native
    launch functions, and -- where the extension is built -- the fast check itself (``words``, read by
    ``_fastlaunch.words_fresh``). ``rebinds``, where every edge watching the word is a global's binding, holds
    what a native launch function compares when the word moved -- ``(namespace, name, value, builtins or
    None)`` for each -- so that a module whose other globals change (a loop at the top of a script or of a
    notebook cell rebinds its variable at each turn) keeps its kernels' launches native: where each still binds
    the very object read, nothing changed, and the word's new value is recorded there."""

    __slots__ = ("_checks", "_edges", "words")

    def __init__(self) -> None:
        # a check, mutable in place: [view or None, expected value (c_uint64), rebinds (a tuple or None)]
        self._checks: dict[int, list[Any]] = {}  # word address -> [view, expected value, rebinds]
        self._edges: dict[int, list[Edge]] = {}  # word address -> the edges that word watches
        self.words: bytes | None = b"" if words_fresh is not None else None
        """The (watched word, expected value) address pairs of every check, as uint64s, for
        ``_fastlaunch.words_fresh``; None where the extension is not built or some word has no view."""

    def add(self, edge: Edge) -> None:
        for view, value in edge.words():
            address = id(edge) if view is None else ctypes.addressof(view)
            group = self._edges.setdefault(address, [])
            if edge in group:
                continue
            group.append(edge)
            check = self._checks.get(address)
            if check is None:
                expected = ctypes.c_uint64(value if view is not None else _UNSEEN)
                check = self._checks[address] = [view, expected, None]
                if self.words is not None:  # one pair more (a word without a view: none, for good)
                    self.words = None if view is None else self.words + _PAIR.pack(address, ctypes.addressof(expected))
            elif check[1].value != value:
                check[1].value = _UNSEEN  # read at different moments: the first check is the slow one
            check[2] = _rebinds(group)

    def include(self, other: Guard) -> None:
        """Also guard what ``other`` guards (a callee's state is its callers' edges too)."""
        for group in other._edges.values():
            for edge in group:
                self.add(edge)

    def fresh(self) -> bool:
        """Fast check: no watched word has moved since it was last checked."""
        words = self.words
        if words is not None:  # where the extension is built: each pair compared in C
            return words_fresh(words)
        for view, expected, _ in self._checks.values():
            if view is None or view.value != expected.value:
                return False
        return True

    def native_checks(self) -> list[tuple[int, int, list[Any]]] | None:
        """(address of each watched word, address of its expected value, the entry owning both and naming its
        rebinds) for native launchers, or None where some word has no view (those launches take the slow
        check)."""
        if any(view is None for view, *_ in self._checks.values()):
            return None
        return [(address, ctypes.addressof(check[1]), check) for address, check in self._checks.items()]

    def revalidate(self) -> bool:
        """Slow check: invalidate the edges that really changed; True when none of this guard's did."""
        ok = True
        with world.lock:
            for address, (view, expected, _) in self._checks.items():
                now = _UNSEEN if view is None else view.value
                if view is not None and now == expected.value:
                    continue
                group = self._edges[address]
                stale = [edge for edge in group if edge.valid and edge.changed()]
                if stale:
                    invalidate_changed(stale)
                ok = ok and all(edge.valid for edge in group)
                expected.value = now
        return ok


def _rebinds(edges: list[Edge]) -> tuple[tuple[dict[str, Any], str, object, dict[str, Any] | None], ...] | None:
    """What a native launch function compares when the word ``edges`` watch moved: each binding's namespace,
    name, value and the builtins it falls back on; None where some edge is no binding (a cell, a function's
    code: those words move only when they changed, and take the slow check)."""
    if not all(type(edge) is Binding for edge in edges):
        return None
    bindings = cast("list[Binding]", edges)
    fallback = vars(builtins)
    return tuple((b.namespace, b.name, b.value, fallback if b.with_builtins else None) for b in bindings)


class Guarded(world.Node):
    """A compiled thing: its validity also depends on Python state (its :class:`Guard`), and it may need
    things of the target at run time (``needs``: records and enum members named by the target or the bridge,
    inherited by every caller)."""

    __slots__ = ("guard", "needs")

    def __init__(self) -> None:
        super().__init__()
        self.guard = Guard()
        self.needs: set[object] = set()

    def usable(self) -> bool:
        """Valid and none of its state changed (one word read per watched word; the slow check on a move)."""
        return self.valid and (self.guard.fresh() or (self.guard.revalidate() and self.valid))
