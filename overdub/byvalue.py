"""The user's code by value: how a def, and what it reads, travels to another process.

A def of the user's code (not an installed package's, which the receiving process has at the same version)
pickles as its code (marshal), the globals its code names, its defaults, keyword defaults, closure,
annotations and docstring (:class:`Shipper`), each def it reaches the same way. What the code reads is part of
what travels, as it is part of what a compile reads in one process: a global array by its contents, a
module of the user's code as a *view* holding the attributes the def's code could read of it
(:class:`ModuleView`: ``cfg.K`` as the sender has it now, the rest of ``cfg`` the receiver's own import).

:class:`Watch` is what a pickle read of one def, as it was: the cache check of the bytes made of it -- one
identity comparison per part, the namespaces' version tags, and a digest of each array it read (an in-place
write moves no tag).

A pickle notes whether what it shipped *reaches* overdub or numba (:attr:`Shipper.reaches`): a def that
does not -- a numpy helper -- can travel by reference as it always did, keeping its module's state its own.
"""

from __future__ import annotations

import builtins
import dis
import hashlib
import importlib
import inspect
import io
import marshal
import pickle
import sys
import types as pytypes
import typing
import weakref
from collections.abc import Callable

import numpy as np

from . import bindings, rewrite
from .embedded import all_names
from .libraries import SHIPPED, is_library_module
from .runtime import runtime

__all__ = ["Shipper", "Watch", "ModuleView", "dumps", "reaches", "arrived_by_value"]

try:  # what Dask and Ray ship with: classes and functions of __main__ by value
    import cloudpickle.cloudpickle as _cloudpickle  # type: ignore[import-untyped]  # the module, its internals

    _BasePickler: type[pickle.Pickler] = _cloudpickle.Pickler
except ImportError:  # pragma: no cover - cloudpickle comes with dask; plain pickle otherwise
    _cloudpickle = None
    _BasePickler = pickle.Pickler

_REACHING = ("overdub", "numba")  # the packages whose objects make a def one that must travel by value
# what a pickle calls to rebuild, not code (and the modules of the package overdub.travel)
_PLUMBING = ("overdub.byvalue", "overdub.travel", "overdub.engines")
# reducers of other modules for objects only they know (a struct class: overdub.travel's), asked first
class_reducers: list[Callable[[object], tuple[object, ...] | None]] = []
runtime.register_cache(f"{__name__}.class_reducers", class_reducers, kept="reducers other modules install: code")


def _plumbing(obj: object) -> bool:
    """Is ``obj`` of the modules a pickle calls to rebuild what travels (this one's, the engines',
    overdub.travel's), which make no def one that reaches overdub?"""
    module = getattr(obj, "__module__", None)
    return module in _PLUMBING or (isinstance(module, str) and module.startswith("overdub.travel."))


def reaches(obj: object) -> bool:
    """Is ``obj`` something of overdub or numba (a generic function, a context, ``od`` itself, a dispatcher,
    ``numba.cuda``...)?"""
    kind = type(obj)
    if kind is pytypes.ModuleType:
        name: object = obj.__name__  # type: ignore[attr-defined]
    elif kind is pytypes.FunctionType or isinstance(obj, type):
        name = getattr(obj, "__module__", None)
    else:
        name = kind.__module__
    return isinstance(name, str) and name.partition(".")[0] in _REACHING


class Shipper(_BasePickler):  # type: ignore[misc, valid-type]  # cloudpickle's Pickler, where installed
    """A pickler that ships each def of the user's code by value, and each module of the user's code as a
    :class:`ModuleView`. It records what it read of each def (``read``) and whether anything of overdub or
    numba was met (``reaches``)."""

    def __init__(self, file: io.BytesIO, read: list[Watch]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.read = read
        self.reaches = False

    def reducer_override(self, obj: object) -> object:
        if not self.reaches and reaches(obj) and not _plumbing(obj):
            self.reaches = True
        kind = type(obj)
        if kind is pytypes.FunctionType and not is_library_module(obj.__module__):
            return function_reduce(obj, self.read)  # type: ignore[arg-type]
        if kind is pytypes.ModuleType and _cloudpickle is None:  # plain pickle has no reduce for modules
            return importlib.import_module, (obj.__name__,)  # type: ignore[attr-defined]
        for reducer in class_reducers:
            reduced = reducer(obj)
            if reduced is not None:
                return reduced
        parent = getattr(super(), "reducer_override", None)
        return NotImplemented if parent is None else parent(obj)


def dumps(value: object, read: list[Watch] | None = None) -> bytes:
    """``value`` pickled with :class:`Shipper`."""
    buffer = io.BytesIO()
    Shipper(buffer, [] if read is None else read).dump(value)
    return buffer.getvalue()


class Unshippable(pickle.PicklingError):
    """What a def reads does not pickle by value (a lock, an open file); ``reaches``: whether what was met
    before reaches overdub or numba."""

    def __init__(self, message: str, reaches: bool) -> None:
        super().__init__(message)
        self.reaches = reaches


def dumps_noting(value: object, read: list[Watch]) -> tuple[bytes, bool]:
    """``value`` pickled with :class:`Shipper`, and whether it reaches overdub or numba (:class:`Unshippable`
    where it does not pickle)."""
    buffer = io.BytesIO()
    shipper = Shipper(buffer, read)
    try:
        shipper.dump(value)
    except Exception as exc:
        raise Unshippable(f"{type(exc).__name__}: {exc}", shipper.reaches) from exc
    return buffer.getvalue(), shipper.reaches


_EMPTY = ("overdub.byvalue", "empty cell")


class Watch:
    """What a pickle read of one def, as it was: its code, defaults and cells by identity; the globals it
    names -- the namespace's version tag first, then, where the tag moved (another global of the module
    changed), value by value; the modules of the user's code it reads attributes of (their tags, then those
    attributes); and each array it read by a digest of its contents."""

    __slots__ = ("ref", "key", "state", "namespace", "tag", "version", "values", "imports", "modules", "arrays")

    def __init__(
        self, func: pytypes.FunctionType, values: dict[str, object], imports: dict[str, ModuleView] | None = None
    ) -> None:
        # the def held weakly: a cache keyed by it weakly (travel's) must not keep it alive through its watch
        self.ref, self.key, self.state = weakref.ref(func), id(func), _def_state(func)
        self.namespace, self.values = func.__globals__, values
        self.tag = bindings.version_view(self.namespace)  # held: the namespace outlives this watch
        self.version = _version(self.tag)
        self.imports = {name: view.module for name, view in (imports or {}).items()}
        views = [*values.values(), *(imports or {}).values()]
        self.modules = [view.watch() for view in views if type(view) is ModuleView]
        self.arrays = _contents_read([*views, *self.state[3:], *_defaults(func)])

    def unchanged(self) -> bool:
        func, state = self.ref(), self.state
        if (
            func is None
            or func.__code__ is not state[0]
            or func.__defaults__ is not state[1]
            or func.__kwdefaults__ is not state[2]
        ):
            return False
        closure = func.__closure__
        if closure is not None and (len(closure) != len(state) - 3 or not _same_cells(closure, state)):
            return False
        version = _version(self.tag)
        if version != self.version or not version:
            get = self.namespace.get
            for name, value in self.values.items():
                now = get(name, _EMPTY)
                if type(value) is ModuleView:
                    if now is not value.module:
                        return False
                elif not bindings.same_value(value, now):
                    return False
            self.version = version  # another global changed: checked by its tag again next time
        for name, module in self.imports.items():
            if sys.modules.get(name) is not module:
                return False
        for module_watch in self.modules:
            if not module_watch.unchanged():
                return False
        for value, digest in self.arrays:
            if _contents_digest(value) != digest:
                return False
        return True


def _version(tag: typing.Any) -> int:
    return 0 if tag is None else int(tag.value)  # 0: no tag to read, every check compares the values


def _same_cells(closure: tuple[pytypes.CellType, ...], state: tuple[object, ...]) -> bool:
    for cell, seen in zip(closure, state[3:]):
        try:
            if cell.cell_contents is not seen:
                return False
        except ValueError:  # an empty cell
            if seen is not _EMPTY:
                return False
    return True


def _defaults(func: pytypes.FunctionType) -> list[object]:
    return [*(func.__defaults__ or ()), *(func.__kwdefaults__ or {}).values()]


def _contents_read(values: list[object]) -> list[tuple[object, bytes]]:
    """What a change in place would change among ``values`` (and the attributes of the module views among
    them): arrays and containers (lists, dicts, sets, tuples holding them) of plain data, with a digest of
    their contents now."""
    found: list[tuple[object, bytes]] = []
    for value in values:
        if type(value) is ModuleView:
            found += _contents_read(list(value.attributes.values()))
        elif isinstance(value, np.ndarray) or type(value) in _CONTAINERS:
            digest = _contents_digest(value)
            if digest is not None:
                found.append((value, digest))
    return found


_CONTAINERS = frozenset({list, dict, set, tuple, bytearray})
_PLAIN = (int, float, complex, str, bytes, bool, type(None), np.generic)


def _contents_digest(value: object) -> bytes | None:
    """A digest of the contents of an array or a container of plain data (None: it holds something else --
    a function, an object -- which is compared as the pickle meets it, not by contents here)."""
    if isinstance(value, np.ndarray):
        return None if value.dtype.hasobject else bindings.contents_digest(value)
    digest = hashlib.blake2b(digest_size=16)
    return digest.digest() if _feed(digest, value, 0) else None


def _feed(digest: typing.Any, value: object, depth: int) -> bool:
    kind = type(value)
    if isinstance(value, _PLAIN):
        digest.update(f"{kind.__name__}:{value!r};".encode())
        return True
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return False
        digest.update(bindings.contents_digest(value))
        return True
    if depth > 8 or kind not in _CONTAINERS:
        return False
    if kind is bytearray:
        digest.update(bytes(typing.cast("bytearray", value)))
        return True
    items = typing.cast("typing.Iterable[object]", value.items() if kind is dict else value)  # type: ignore[attr-defined]
    digest.update(f"{kind.__name__}[".encode())
    for item in items:
        if not _feed(digest, item, depth + 1):
            return False
    digest.update(b"]")
    return True


def _def_state(func: pytypes.FunctionType) -> tuple[object, ...]:
    cells = []
    for cell in func.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # an empty cell
            cells.append(_EMPTY)
    return (func.__code__, func.__defaults__, func.__kwdefaults__, *cells)


def function_reduce(func: pytypes.FunctionType, read: list[Watch]) -> tuple[object, ...]:
    """``func`` by value: a skeleton made first (so a def naming itself pickles), then its state."""
    namespace, names = func.__globals__, all_names(func.__code__)
    values: dict[str, object] = {}
    for name in rewrite.global_names(func.__code__):
        if name in namespace:
            value = namespace[name]
            if type(value) is pytypes.ModuleType and not is_library_module(value.__name__):
                value = ModuleView(value, names)
            values[name] = value
    imports = _imported_views(func.__code__, names)
    read.append(Watch(func, values, imports))
    cells = list(_def_state(func)[3:])
    submodules = _submodules_named(values.values(), names)
    state = (values, func.__defaults__, func.__kwdefaults__, tuple(cells), _annotations(func), func.__doc__, submodules)
    skeleton = (marshal.dumps(func.__code__), func.__name__, func.__qualname__, func.__module__, len(cells))
    if imports:  # a def importing the user's modules in its body: an __import__ of its own, given them here
        return _function_skeleton, (*skeleton, True), (*state, imports), None, None, _function_fill
    return _function_skeleton, skeleton, state, None, None, _function_fill


def _annotations(func: pytypes.FunctionType) -> dict[str, object]:
    """``func``'s annotations evaluated (a module under ``from __future__ import annotations`` has strings,
    naming globals its code may not read, which then do not travel), or as they are where they do not
    evaluate."""
    try:
        return inspect.get_annotations(func, eval_str=True)
    except Exception:  # a name not defined yet, say: the strings, evaluated (or not) where they arrive
        return dict(func.__annotations__)


def _function_skeleton(
    code: bytes, name: str, qualname: str, module: str, ncells: int, imports: bool = False
) -> pytypes.FunctionType:
    # a function's builtins are fixed when it is made: an importer of its own goes in now, its modules later
    own = {**vars(builtins), "__import__": Importer()} if imports else builtins
    namespace = {"__builtins__": own, "__name__": module, SHIPPED: True}
    cells = tuple(pytypes.CellType() for _ in range(ncells))
    func = pytypes.FunctionType(marshal.loads(code), namespace, name, None, cells or None)
    func.__qualname__, func.__module__ = qualname, module
    _shipped_here.add(func)
    return func


def _is_empty(value: object) -> bool:
    """Is ``value`` the empty-cell marker (compared without ``==`` on what it is not: an array's is
    elementwise)?"""
    return type(value) is tuple and len(value) == 2 and all(type(v) is str for v in value) and value == _EMPTY


def _function_fill(func: pytypes.FunctionType, state: tuple[typing.Any, ...]) -> None:
    names, defaults, kwdefaults, cells, annotations, doc, submodules, *imports = state
    if imports:
        func.__globals__["__builtins__"]["__import__"].modules.update(imports[0])
    for name in submodules:  # ``od.cuda.random`` of a global ``od``: loaded where the def arrives, as here
        try:
            importlib.import_module(name)
        except Exception:  # read where the def runs: its AttributeError then
            pass
    func.__globals__.update(names)
    func.__defaults__, func.__kwdefaults__ = defaults, kwdefaults
    for cell, value in zip(func.__closure__ or (), cells):
        if not _is_empty(value):
            cell.cell_contents = value
    func.__annotations__, func.__doc__ = annotations, doc


def _submodules_named(values: typing.Iterable[object], names: frozenset[str]) -> tuple[str, ...]:
    """The loaded submodules of the modules among ``values`` that code using ``names`` could reach as
    attributes (``overdub.cuda.random`` of ``od`` where the code names ``cuda`` and ``random``)."""
    found: list[str] = []
    for value in values:
        if type(value) is pytypes.ModuleType:
            prefix = value.__name__ + "."
            for tokens, name in _loaded_submodules().get(value.__name__.partition(".")[0], ()):
                if name.startswith(prefix) and tokens <= names:
                    found.append(name)
    return tuple(found)


_loaded: dict[str, object] = {}  # "key": sys.modules' size and last name; "index": top-level name -> submodules
runtime.register_cache(f"{__name__}._loaded", _loaded)


def _loaded_submodules() -> dict[str, list[tuple[frozenset[str], str]]]:
    """Every loaded submodule, by its top-level package, with the names a def must use to reach it from the
    package (``overdub.cuda.random``: ``cuda`` and ``random``); made again when ``sys.modules`` grows."""
    import sys

    modules = sys.modules
    key = (len(modules), next(reversed(modules)))
    if _loaded.get("key") != key:
        index: dict[str, list[tuple[frozenset[str], str]]] = {}
        for name in list(modules):
            top, dot, rest = name.partition(".")
            if dot:
                index.setdefault(top, []).append((frozenset(rest.split(".")), name))
        _loaded["index"], _loaded["key"] = index, key
    return typing.cast("dict[str, list[tuple[frozenset[str], str]]]", _loaded["index"])


_shipped_here: weakref.WeakSet[pytypes.FunctionType] = weakref.WeakSet()  # the defs Shipper's pickles made
runtime.register_cache(f"{__name__}._shipped_here", _shipped_here, kept="which defs arrived by value: a fact of each")


def note_shipped(func: pytypes.FunctionType) -> None:
    """``func`` stands for a def that arrived by value (a copy of one)."""
    _shipped_here.add(func)


def arrived_by_value(func: pytypes.FunctionType) -> bool:
    """Was ``func`` made by unpickling a def shipped by value: by :class:`Shipper`, or by cloudpickle from
    another process's ``__main__`` (its globals are not this process's ``__main__``)?"""
    if func in _shipped_here:
        return True
    import sys

    main = sys.modules.get("__main__")
    return func.__module__ == "__main__" and (main is None or vars(main) is not func.__globals__)


# --- modules of the user's code ---------------------------------------------------------------------------


def _imported_views(code: pytypes.CodeType, names: frozenset[str]) -> dict[str, ModuleView]:
    """The modules of the user's code that ``code`` imports in its body (``import cfg``, ``from cfg import K``,
    ``import pkg.mod``), loaded here, as views of what ``code`` could read of them: an import in a body is a
    read of the module as it is now, as a global module is."""
    views: dict[str, ModuleView] = {}
    for imported in _imported_names(code):
        for name in dict.fromkeys((imported, imported.partition(".")[0])):
            module = sys.modules.get(name)
            if isinstance(module, pytypes.ModuleType) and not is_library_module(name):
                views[name] = ModuleView(module, names)
    return views


_imports: weakref.WeakKeyDictionary[pytypes.CodeType, tuple[str, ...]] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._imports", _imports)


def _imported_names(code: pytypes.CodeType) -> tuple[str, ...]:
    """The absolute imports of ``code`` and the code it nests (decoded once per code object)."""
    found = _imports.get(code)
    if found is None:
        names = [i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"]
        for const in code.co_consts:
            if isinstance(const, pytypes.CodeType):
                names += _imported_names(const)
        found = _imports[code] = tuple(dict.fromkeys(names))
    return found


class Importer:
    """The ``__import__`` of a def that arrived by value and imports modules of the sender's code in its body:
    those modules as the sender had them when it shipped the def (their views), every other import as this
    process makes it."""

    __slots__ = ("modules",)

    def __init__(self) -> None:
        self.modules: dict[str, pytypes.ModuleType] = {}

    def __call__(
        self,
        name: str,
        globals: typing.Any = None,  # __import__'s own parameter names
        locals: typing.Any = None,
        fromlist: typing.Any = (),
        level: int = 0,
    ) -> pytypes.ModuleType:
        view = self.modules.get(name if fromlist else name.partition(".")[0]) if level == 0 else None
        if view is None:
            return builtins.__import__(name, globals, locals, fromlist, level)
        try:  # as the statement would: the submodules loaded
            builtins.__import__(name, globals, locals, fromlist, level)
        except ImportError:  # a module only the sender has: what did not travel fails when read, naming why
            pass
        return view


class ModuleView:
    """A module of the user's code as a def reads it: the attributes its code could read (``co_names``),
    as the sender has them. It arrives as a module of that name holding them, the rest read from the
    receiver's own import of the module -- or, where the receiver cannot import it, an error naming why."""

    __slots__ = ("module", "attributes")

    def __init__(self, module: pytypes.ModuleType, names: frozenset[str], depth: int = 0) -> None:
        namespace = vars(module)
        self.module = module
        self.attributes = {n: namespace[n] for n in sorted(names) if n in namespace and not n.startswith("__")}
        for name, value in self.attributes.items():  # ``cfg.sub.K``: a submodule of the user's code as read too
            if isinstance(value, pytypes.ModuleType) and depth < 4 and not is_library_module(value.__name__):
                self.attributes[name] = ModuleView(value, names, depth + 1)

    def watch(self) -> ModuleWatch:
        return ModuleWatch(vars(self.module), self.attributes)

    def __reduce__(self) -> tuple[object, ...]:
        return _module_arriving, (self.module.__name__, self.attributes)


class ModuleWatch:
    """What a pickle read of a module of the user's code: its version tag, then the attributes read, and the
    submodules read through it (each watched on its own: a change there moves no tag here)."""

    __slots__ = ("namespace", "tag", "version", "attributes", "nested")

    def __init__(self, namespace: dict[str, object], attributes: dict[str, object]) -> None:
        self.namespace = namespace
        self.attributes = {n: v.module if type(v) is ModuleView else v for n, v in attributes.items()}
        self.nested = [v.watch() for v in attributes.values() if type(v) is ModuleView]
        self.tag = bindings.version_view(namespace)
        self.version = _version(self.tag)

    def unchanged(self) -> bool:
        version = _version(self.tag)
        if version != self.version or not version:
            get = self.namespace.get
            if not all(bindings.same_value(value, get(name, _EMPTY)) for name, value in self.attributes.items()):
                return False
            self.version = version
        return all(watch.unchanged() for watch in self.nested)


class ArrivedModule(pytypes.ModuleType):
    """A module of the sender's code as a def shipped by value reads it (:class:`ModuleView`)."""

    def __getattr__(self, name: str) -> object:
        real = self.__dict__.get("__overdub_module__")
        if real is None:
            raise AttributeError(
                f"overdub: module {self.__name__!r}, which code sent to this process reads, cannot be "
                f"imported here: {self.__dict__.get('__overdub_why__')}"
            )
        return getattr(real, name)


def _module_arriving(name: str, attributes: dict[str, object]) -> pytypes.ModuleType:
    """The module ``name`` as the sender's def reads it (never raises: a module that cannot be imported
    here makes each read of what the sender did not send an error naming why)."""
    module = ArrivedModule(name)
    try:
        module.__overdub_module__ = importlib.import_module(name)  # type: ignore[attr-defined]
        module.__file__ = getattr(module.__overdub_module__, "__file__", None)
    except Exception as exc:
        module.__overdub_module__ = None  # type: ignore[attr-defined]
        module.__overdub_why__ = f"{type(exc).__name__}: {exc}"  # type: ignore[attr-defined]
    vars(module).update(attributes)
    return module
