"""Fingerprints: what a compile consulted, written down so that another process can check it still holds.

A compiled kernel's edges are nodes of this process -- a dispatch answer, a global's binding, a function's
code. For the disk cache (:mod:`overdub.diskcache`) each becomes a *fact* another process can re-check: how
to find the thing again there (a *locator*: a module and a qualified name, a generic function's table and a
signature, the kernel itself) and a *content digest* of what it was (code by its bytecode, constants and
names -- not its file, line numbers or the file's time; data by its bits; a generic function or a module by
its name, its methods being facts of their own). Each kind of fact is a small record that checks itself
(:class:`DispatchFact`, :class:`EmptyTableFact`, :class:`StructFact`, :class:`FunctionFact`,
:class:`GlobalFact`). :func:`record` writes the facts of a compiled kernel;
:func:`replay` re-checks them in this process *through the same calls a compile makes* (a dispatch, a read of
a global, a read of a function's code), so the node being built gets exactly the edges a fresh compile would
have given it, and in-process invalidation works the same after a load.

What has no locator or no content digest -- a closure cell, an object of the user's own class, a function
that cannot be found by name -- raises :class:`Uncacheable`: the kernel is then compiled and not stored,
never loaded on trust. Objects of installed packages (numba's, numpy's, overdub's, the standard library's)
are digested by their names: their code is covered by the package versions in the cache key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
import struct
import sys
import sysconfig
import types as pytypes
import typing
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeGuard, cast

import numpy as np

from . import bindings, bridge, rewrite, world
from .bindings import Binding, CellBinding, FunctionState, Guarded
from .context import POSTHOOK, PREHOOK, Context, ContextShape, TargetRoot
from .registry import EmptyTable, GenericFunction, Method, MethodMatch, MethodTable, Signature, TableOwner
from .runtime import runtime
from .types import StructType, type_name

if TYPE_CHECKING:
    from .compiler import CompileJob, Kernel

__all__ = [
    "Uncacheable",
    "Fact",
    "DispatchFact",
    "EmptyTableFact",
    "StructFact",
    "FunctionFact",
    "GlobalFact",
    "record",
    "replay",
    "value_digest",
    "function_digest",
    "context_digest",
    "type_digest",
]


SHIPPED = "__overdub_shipped__"  # the mark of the namespace of a def that arrived by value (overdub.travel)

Locator: TypeAlias = tuple[Any, ...]
"""How another process finds a thing again: plain data, a kind (a string) followed by strings and locators."""


class Uncacheable(Exception):
    """Something a compile consulted has no name another process can find it by, or no content digest."""


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:40]


# --- content digests ------------------------------------------------------------------------------------

_LIBRARY_PATHS = tuple(
    sorted(
        {os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    )
)
_code_digests: weakref.WeakKeyDictionary[pytypes.CodeType, str] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._code_digests", _code_digests)


def is_library_module(name: object) -> bool:
    """Is ``name`` a module of an installed package, the standard library or overdub (whose versions the
    cache key holds), rather than the user's own code?"""
    if not isinstance(name, str) or name in ("__main__", "__mp_main__"):
        return False  # the program's own code -- even where a worker's __main__ is an installed package's file
    top = name.split(".")[0]
    if top in ("overdub", "builtins") or top in sys.builtin_module_names:
        return True
    file = getattr(sys.modules.get(name) or sys.modules.get(top), "__file__", None)
    return isinstance(file, str) and _is_library_file(file)


@functools.lru_cache(maxsize=4096)
def _is_library_file(file: str) -> bool:
    """Is ``file`` under an installed package's or the standard library's directory -- site-packages, or a
    directory a package was installed into with its metadata beside it (``pip install --target``)?
    (``realpath`` asks the file system for every link on the path: once per file.)"""
    path = os.path.realpath(file)
    return path.startswith(_LIBRARY_PATHS) or _installed_with_metadata(path)


def _installed_with_metadata(path: str) -> bool:
    """Is ``path`` a module of a distribution whose ``*.dist-info`` (or ``*.egg-info``) lies beside its
    top-level package, as pip leaves it in any directory it installs into?"""
    directory, top = os.path.dirname(path), os.path.splitext(os.path.basename(path))[0]
    while os.path.exists(os.path.join(directory, "__init__.py")):  # up to the directory on sys.path
        directory, top = os.path.dirname(directory), os.path.basename(directory)
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    prefix = top.lower().replace("-", "_") + "-"
    return any(n.lower().startswith(prefix) and n.endswith((".dist-info", ".egg-info")) for n in names)


runtime.register_cache(f"{__name__}._is_library_file", _is_library_file)

_VERSIONED = frozenset({"overdub", "numba", "numba_cuda", "llvmlite", "numpy", "builtins"})
_SITE_PATHS = tuple(sorted({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")}))
_STDLIB_PATHS = tuple(sorted({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}))


def is_versioned_module(name: object) -> bool:
    """Is ``name`` a module whose version the cache key holds -- overdub (by its source), numba, numba-cuda,
    llvmlite, numpy, Python's standard library -- so that its objects may be known by name? (Another
    installed package is not: its code and values are digested where compiled code embeds them.)"""
    if not isinstance(name, str) or name in ("__main__", "__mp_main__"):
        return False  # the program's own code -- even where a worker's __main__ is an installed package's file
    top = name.split(".")[0]
    if top in _VERSIONED or top in sys.builtin_module_names:
        return True
    file = getattr(sys.modules.get(name) or sys.modules.get(top), "__file__", None)
    return isinstance(file, str) and _is_stdlib_file(file)


@functools.lru_cache(maxsize=4096)
def _is_stdlib_file(file: str) -> bool:
    path = os.path.realpath(file)
    return path.startswith(_STDLIB_PATHS) and not path.startswith(_SITE_PATHS)


runtime.register_cache(f"{__name__}._is_stdlib_file", _is_stdlib_file)


def code_digest(code: pytypes.CodeType) -> str:
    """What a code object computes: bytecode, constants (nested code too), names, flags and arity -- not
    where it is (file, first line, line table), so an edit elsewhere in its file is no change."""
    digest = _code_digests.get(code)
    if digest is None:
        consts = tuple(code_digest(c) if isinstance(c, pytypes.CodeType) else value_digest(c) for c in code.co_consts)
        digest = _code_digests[code] = _digest(
            "code",
            code.co_name,
            code.co_qualname,
            code.co_argcount,
            code.co_posonlyargcount,
            code.co_kwonlyargcount,
            code.co_flags,
            code.co_code.hex(),
            consts,
            code.co_names,
            code.co_varnames,
            code.co_freevars,
            code.co_cellvars,
            code.co_exceptiontable.hex(),
        )
    return digest


def function_digest(func: Callable[..., Any]) -> str:
    """A def's name, code and defaults (its globals are facts of their own)."""
    kwdefaults = sorted((func.__kwdefaults__ or {}).items())
    return _digest(
        "function",
        func.__module__,
        func.__qualname__,
        code_digest(func.__code__),
        value_digest(func.__defaults__),
        value_digest(tuple(kwdefaults)),
    )


def _data_digest(value: Any) -> str | None:
    """Digest of a value that is data (compiled code may hold it as a constant), or None."""
    kind = type(value)
    if value is None or value is Ellipsis or kind in (bool, int, str, bytes):
        return f"{kind.__name__}:{value!r}"
    if kind is float:
        return f"float:{struct.pack('<d', value).hex()}"
    if kind is complex:
        return f"complex:{struct.pack('<dd', value.real, value.imag).hex()}"
    if kind in (tuple, frozenset):
        items = [value_digest(v) for v in value]
        return f"{kind.__name__}:({','.join(sorted(items) if kind is frozenset else items)})"
    if isinstance(value, np.generic) and not value.dtype.hasobject:
        return f"np:{value.dtype.descr!r}:{value.tobytes().hex()}"
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return _digest(
            "ndarray",
            value.dtype.descr,
            value.shape,
            value.strides,
            value.flags.writeable,
            hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
        )
    if isinstance(value, np.dtype):
        return f"dtype:{value.descr!r}"
    return None


def value_digest(value: object) -> str:
    """A digest of ``value`` equal in two processes exactly when compiled code reading it is the same code;
    raises :class:`Uncacheable` for values without one."""
    if value is bindings._MISSING:
        return "missing"
    data = _data_digest(value)
    if data is not None:
        return data
    if isinstance(value, pytypes.ModuleType):
        return f"module:{value.__name__}"
    if isinstance(value, GenericFunction):
        return f"generic:{value.__module__}.{value.__qualname__}"
    if isinstance(value, pytypes.CodeType):
        return code_digest(value)
    function = bridge.python_function(value)
    if function is not None:
        return f"function:{type(value).__module__}.{type(value).__qualname__}:{function_digest(function)}"
    return _library_object_digest(value)


def _library_object_digest(value: object) -> str:
    kind = type(value)
    module = value.__module__ if isinstance(value, type) else getattr(value, "__module__", None)
    module = module if isinstance(module, str) else kind.__module__
    if not (is_library_module(module) and is_library_module(kind.__module__)):
        raise Uncacheable(
            f"{value!r:.80} (a {kind.__qualname__} of {module}) is neither data, nor a function, "
            f"nor an object of an installed package"
        )
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if isinstance(name, str):
        return f"lib:{kind.__module__}.{kind.__qualname__}:{module}.{name}"
    text = repr(value)
    if "0x" in text:
        raise Uncacheable(f"{text:.80} has no name another process could know it by")
    return f"lib:{kind.__module__}.{kind.__qualname__}:{text}"


def type_digest(t: object) -> str:
    """A numba type (or lattice type) by its class and full repr, and the layout of each struct type in it
    (a struct type's repr is its class's name only: a struct edited in its file keeps its name)."""
    structs = sorted(_struct_digest(s) for s in _structs_in(t, set()))
    return f"{type(t).__module__}.{type(t).__qualname__}:{t!r}" + (f"{structs}" if structs else "")


def _structs_in(t: object, seen: set[int]) -> list[StructType]:
    """The struct types ``t`` contains: itself, an array's element type, a tuple's items, a struct's fields."""
    if id(t) in seen:
        return []
    seen.add(id(t))
    found: list[StructType] = [t] if isinstance(t, StructType) else []
    inner = [getattr(t, "dtype", None), *getattr(t, "types", ())]
    if isinstance(t, StructType):
        inner += [field for _, field in t.fields]
    for item in inner:
        if item is not None and not isinstance(item, (str, int)):
            found += _structs_in(item, seen)
    return found


def _struct_digest(t: StructType) -> str:
    cls = t.cls
    dtype = cast("np.dtype[Any]", t.numpy_dtype)  # made by overdub.structs with the type
    return _digest(
        "struct",
        cls.__module__,
        cls.__qualname__,
        [(n, repr(f)) for n, f in t.fields],
        dtype.descr,
        dtype.itemsize,
        repr(t.params),
    )


def context_digest(ctx: Context) -> str:
    """A context of a chain: where it is found, and its forwards and replacements (its parent is the next
    context of the chain; its overdub tables are facts). A target's root is what overdub's code makes it."""
    if isinstance(ctx, TargetRoot):
        return f"root:{ctx.name}:{type_digest(ctx.state)}"
    if ctx.observes(PREHOOK) or ctx.observes(POSTHOOK):
        raise Uncacheable(f"{ctx!r} has hooks")
    forwards, replacements = ctx.contents()
    items = sorted(f"{value_digest(callee)}->{_target_digest(to)}" for callee, to in forwards)
    items += sorted(f"{value_digest(obj)}=>{_target_digest(new)}" for obj, new in replacements)
    return _digest(type(ctx).__qualname__, _context_ref(ctx), items)


# --- code numba compiles itself -------------------------------------------------------------------------
# A function overdub compiles is a fact of its own, and so is each global it reads. Code numba compiles or
# types itself -- an @njit function (numba's typing has it registered, so overdub delegates the call), an
# @overload's or @intrinsic's definition, the values all that code reads -- leaves no edge: numba freezes
# what it reads into the kernel. Such a value is digested with everything it embeds, transitively: the code,
# the defaults and closure, each global the code names (for a module, the attributes the code could read),
# and the Python functions numba's registrations of it run. Only objects of the versioned packages
# (:func:`is_versioned_module`) are known by name.


def embeds_numba_code(value: object, compiled: set[pytypes.FunctionType]) -> bool:
    """Does compiled code reading ``value`` embed what numba makes of it (code overdub did not compile, an
    object numba types by its registrations), rather than the value itself or a callee overdub compiled?"""
    if value is bindings._MISSING or _data_digest(value) is not None:
        return False
    if isinstance(value, (pytypes.ModuleType, GenericFunction, pytypes.CodeType)):
        return False
    function = bridge.python_function(value)
    return function is None or function not in compiled


def embedded_digest(value: object, typing: bool = True) -> tuple[str, frozenset[tuple[str, str]]]:
    """The digest of ``value`` with everything numba embeds of it, and the typing code (an ``@overload``'s or
    ``@intrinsic``'s function, as module and qualname) it covers; raises :class:`Uncacheable` for what has no
    digest. ``typing=False``: without the typing code numba registered for the functions met (for telling
    two copies of a definition apart, not for the disk cache)."""
    walk = _EmbeddedWalk(typing)
    return walk.digest(value), frozenset(walk.typed_by)


def _all_names(code: pytypes.CodeType) -> frozenset[str]:
    """The names ``code`` and the code nested in it use: globals and every attribute it could read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _all_names(const)
    return frozenset(names)


class _EmbeddedWalk:
    """One walk of what numba embeds for a value. A value met again (recursion, shared helpers) is digested
    by the order it was first met in, so the digest is the same in every process."""

    def __init__(self, typing: bool = True) -> None:
        self.typing = typing
        self.digests: dict[int, str] = {}
        self.modules: set[tuple[int, frozenset[str]]] = set()
        self.typed_by: set[tuple[str, str]] = set()
        self._alive: list[object] = []  # what was met, alive for the walk: an id is not reused meanwhile

    def digest(self, value: object, names: frozenset[str] = frozenset()) -> str:
        if type(value) is tuple:  # a tuple of functions (numba unrolls it) as well as of data
            return f"tuple:({','.join(self.digest(v, names) for v in value)})"
        data = "missing" if value is bindings._MISSING else _data_digest(value)
        if data is not None:
            return data
        if isinstance(value, pytypes.ModuleType):
            return self._module(value, names)
        if isinstance(value, GenericFunction):  # its dispatches are facts of their own
            # two copies of a definition (typing=False) differ where they call different generic functions of
            # one name (two closures of a factory): the object itself, held alive by the copies
            return value_digest(value) if self.typing else f"{value_digest(value)}@{id(value)}"
        if id(value) in self.digests:
            return self.digests[id(value)]
        self._alive.append(value)
        self.digests[id(value)] = f"met:{len(self.digests)}"
        digest = self.digests[id(value)] = self._object(value)
        return digest

    def _module(self, module: pytypes.ModuleType, names: frozenset[str]) -> str:
        """A module by name and, outside the versioned packages, each attribute the code could read of it."""
        if is_versioned_module(module.__name__) or (id(module), names) in self.modules:
            return f"module:{module.__name__}"
        self.modules.add((id(module), names))
        namespace = vars(module)  # not getattr: a module's __getattr__ may import or warn
        attributes = [f"{n}={self.digest(namespace[n], names)}" for n in sorted(names) if n in namespace]
        return _digest("module", module.__name__, attributes)

    def _object(self, value: object) -> str:
        function = bridge.python_function(value)
        if function is not None:
            options = getattr(value, "targetoptions", None)  # a dispatcher's: fastmath, boundscheck, ...
            parts = [self._function(function), repr(sorted(options.items())) if isinstance(options, dict) else ""]
        else:
            parts = [_library_object_digest(value)]  # raises for an object of the user's own code
        typing = bridge.typing_code(value) if self.typing else []
        for template, source in typing:
            if source is None:  # a template class (numba wraps a registered one in its own: its bases say whose)
                mro = cast(type, template).__mro__
                module = next((c.__module__ for c in mro if not is_versioned_module(c.__module__)), None)
                if module is not None:
                    raise Uncacheable(f"numba types {value!r:.60} with a template of {module}: its code is no fact")
            elif not is_versioned_module(source.__module__):
                self.typed_by.add((source.__module__, source.__qualname__))
                parts.append(self.digest(source))
        module = getattr(value, "__module__", None) if function is None else function.__module__
        if function is None and not is_versioned_module(module) and not typing:
            raise Uncacheable(f"{value!r:.80} of {module}, which numba would embed, has no content digest")
        return _digest("embedded", *parts)

    def _function(self, func: pytypes.FunctionType) -> str:
        """A function's code, defaults, closure and every global its code names."""
        code = func.__code__
        names = _all_names(code)
        parts = [function_digest(func), self.digest(func.__defaults__ or (), names)]
        parts += [self.digest(tuple(sorted((func.__kwdefaults__ or {}).items())), names)]
        for cell in func.__closure__ or ():
            try:
                parts.append(self.digest(cell.cell_contents, names))
            except ValueError:  # an empty cell
                parts.append("empty")
        for name in rewrite.global_names(code):
            parts.append(f"{name}={self.digest(bindings.lookup(func.__globals__, name), names)}")
        for name, module in _imports_given(func):
            parts.append(f"import {name}={self.digest(module, names)}")
        return _digest("function", *parts)


def _imports_given(func: pytypes.FunctionType) -> list[tuple[str, object]]:
    """The modules a def that arrived by value imports in its body as its sender had them (the ``modules`` of
    its own ``__import__``, :class:`overdub.byvalue.Importer`): part of what it reads."""
    builtins_ = cast(Any, func).__builtins__  # (typeshed lacks FunctionType.__builtins__)
    modules = getattr(builtins_.get("__import__"), "modules", None) if type(builtins_) is dict else None
    return sorted(modules.items()) if isinstance(modules, dict) else []


def _target_digest(value: object) -> str:
    """What a context forwards a call to or replaces an object with: an object numba compiles itself (an
    ``@njit`` function, say) with everything it embeds, since no fact records it."""
    if bridge.python_function(value) is value or not embeds_numba_code(value, set()):
        return value_digest(value)  # a def: overdub compiles it, and its code and globals are facts
    return embedded_digest(value)[0]


# --- locators -------------------------------------------------------------------------------------------


def resolve_imported(module: str, qualname: str) -> object:
    """The object ``module`` + ``qualname`` names among the modules imported in this process (a check never
    imports anything: a module this process has not imported is not what the compile read)."""
    value: object = sys.modules[module]
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _resolves_to(module: object, qualname: object, obj: object) -> bool:
    if not (isinstance(module, str) and isinstance(qualname, str)) or "<" in qualname:
        return False
    try:
        found = resolve_imported(module, qualname)
    except (KeyError, AttributeError):  # not imported, no such attribute: not found
        return False
    return found is obj or (found is not None and bridge.python_function(found) is obj)


_NOWHERE = pytypes.ModuleType("<nowhere>")


# obj -> the variable _ref found it in (re-checked before reuse); held weakly, so an entry dies with its object
_found_variables: weakref.WeakKeyDictionary[object, tuple[str, str]] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._found_variables", _found_variables)


def _ref(obj: object) -> tuple[str, str]:
    """(module, qualified name) that another process imports ``obj`` by: its own names, else a variable of
    its module or of a namespace module registered under it (``overdub.targets.cpu.cuda``)."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    for candidate in (module, "numpy" if isinstance(obj, np.ufunc) else None):
        if isinstance(candidate, str) and isinstance(qualname, str) and _resolves_to(candidate, qualname, obj):
            return candidate, qualname
    try:
        found = _found_variables.get(obj)
    except TypeError:  # no weak reference to it, or unhashable: searched each time
        found = None
    if found is not None and _resolves_to(*found, obj):
        return found
    found = _variable_of(obj, module)
    with contextlib.suppress(TypeError):
        _found_variables[obj] = found
    return found


def _variable_of(obj: object, module: object) -> tuple[str, str]:
    """The variable of ``module`` or of a module under it that holds ``obj`` (a search of every module's
    namespace: :func:`_ref` remembers the answer -- the registries of od.method's and the dunders' tables are
    found this way in every compile -- and checks it still holds before reusing it)."""
    if isinstance(module, str):
        for name in [module] + sorted(n for n in list(sys.modules) if n.startswith(module + ".")):
            variables = [k for k, v in vars(sys.modules.get(name, _NOWHERE)).items() if v is obj]
            if variables and _resolves_to(name, min(variables), obj):
                return name, min(variables)
    raise Uncacheable(f"{obj!r:.80} cannot be found by name in another process")


def _context_ref(ctx: Context) -> Locator:
    if isinstance(ctx, TargetRoot):
        return ("root", ctx.name)
    module = sys.modules.get(ctx.__module__)
    names = [name for name, value in vars(module).items() if value is ctx] if module else []
    if not names:
        raise Uncacheable(f"{ctx!r} is not a variable of an importable module")
    return ("context", ctx.__module__, min(names))


def _find_context(ref: Locator, job: CompileJob) -> Context:
    if ref[0] == "root":
        return next(ctx for ctx in job.chain if isinstance(ctx, TargetRoot) and ctx.name == ref[1])
    return cast(Context, resolve_imported(ref[1], ref[2]))


def _table_ref(table: MethodTable) -> Locator:
    owner = table.owner
    if owner is None:
        raise Uncacheable(f"it consulted {table.name}, a table no other process can find")
    if isinstance(owner, GenericFunction):
        return ("generic", *_ref(owner))
    registry, callee = owner
    if isinstance(registry, Context):
        return ("overdub", _context_ref(registry), _ref(callee))
    # another registry of tables per callee, a variable of its module (od.method's, the dunders')
    return ("registry", _ref(registry), _ref(callee))


def _find_table(ref: Locator, job: CompileJob) -> MethodTable:
    if ref[0] == "generic":
        return cast(GenericFunction, resolve_imported(ref[1], ref[2])).table
    if ref[0] == "registry":
        registry = cast(TableOwner, resolve_imported(*ref[1]))
        return registry.table(cast("Callable[..., Any]", resolve_imported(*ref[2])))
    return _find_context(ref[1], job).table(resolve_imported(*ref[2]))


def _signature_digest(sig: tuple[object, ...]) -> str:
    return ",".join(f"{type_name(t)}" for t in sig)


def _method_digest(method: Method) -> str:
    return f"{_signature_digest(method.sig)}={function_digest(method.func)}"


def _answer_digest(match: MethodMatch) -> str:
    if match.method is not None:
        return f"method:{_method_digest(match.method)}"
    return f"ambiguous:{sorted(map(_method_digest, match.ambiguous))}" if match.ambiguous else "none"


def _function_ref(func: pytypes.FunctionType, job: CompileJob, methods: dict[int, Locator]) -> Locator:
    if func is job.func:
        return ("kernel",)
    if id(func) in methods:
        return methods[id(func)]
    return ("ref", *_ref(func))


def _find_function(ref: Locator, job: CompileJob) -> pytypes.FunctionType:
    """The def a locator names (a changed one -- no def now -- fails its fact's check)."""
    if ref[0] == "kernel":
        return cast(pytypes.FunctionType, job.func)
    if ref[0] == "method":
        table = _find_table(ref[1], job)
        return cast(pytypes.FunctionType, next(m.func for m in table.methods if _signature_digest(m.sig) == ref[2]))
    found = resolve_imported(ref[1], ref[2])
    return cast(pytypes.FunctionType, bridge.python_function(found) or found)


def _namespace_ref(namespace: dict[str, Any], functions: dict[int, Locator]) -> Locator:
    name = namespace.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is not None and vars(module) is namespace:
        return ("module", name)
    if id(namespace) in functions:
        return ("globals", functions[id(namespace)])
    raise Uncacheable(f"a namespace of {name!r} that is not its module's")


def _find_namespace(ref: Locator, functions: dict[Locator, pytypes.FunctionType]) -> dict[str, Any]:
    if ref[0] == "module":
        return vars(sys.modules[ref[1]])
    return functions[ref[1]].__globals__


# --- facts ----------------------------------------------------------------------------------------------
# A fact is a record of locators and digests (plain data: it is pickled into a disk cache entry and read by
# another process), and it checks itself: through the calls a compile makes, so the node being built gets
# the edge a fresh compile would give it. ``functions`` maps the locator of each function checked so far to
# that function, where a global's fact finds the namespace it was read from.


class Fact:
    """One thing a compile consulted, as another process re-checks it."""

    __slots__ = ()

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        """None when the fact holds in this process (for the compile of ``job``), else what changed."""
        raise NotImplementedError

    def describe(self) -> str:
        """The fact, for a message saying it cannot be checked here."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, slots=True)
class DispatchFact(Fact):
    """In the method table ``table`` (a locator), ``argtypes`` reached the answer ``answer`` digests."""

    table: Locator
    argtypes: Signature
    answer: str

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        match = _find_table(self.table, job).dispatch(self.argtypes)
        return None if _answer_digest(match) == self.answer else f"{match.describe()} is a new answer"

    def describe(self) -> str:
        return f"the dispatch of ({_signature_digest(self.argtypes)}) in {self.table!r:.80}"


@dataclasses.dataclass(frozen=True, slots=True)
class EmptyTableFact(Fact):
    """The method table ``table`` (a locator) had no method."""

    table: Locator

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        table = _find_table(self.table, job)
        return None if table.is_empty() else f"{table.name} has methods now"

    def describe(self) -> str:
        return f"the empty table {self.table!r:.80}"


@dataclasses.dataclass(frozen=True, slots=True)
class StructFact(Fact):
    """The ``@od.struct`` class ``cls`` (a module and a qualified name) had the layout ``digest``."""

    cls: tuple[str, str]
    digest: str

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        cls: Any = resolve_imported(*self.cls)  # an @od.struct class: overdub.structs gave it these attributes
        world.consult(cls.__overdub_definition__)
        same = cls.__overdub_definition__.valid and _struct_digest(cls.__overdub_type__) == self.digest
        return None if same else f"the struct {cls.__qualname__} changed"

    def describe(self) -> str:
        return f"the struct {'.'.join(self.cls)}"


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionFact(Fact):
    """The function ``function`` (a locator: the kernel, a method of a table, a module's variable) compiled
    had the code ``digest``."""

    function: Locator
    digest: str

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        func = functions[self.function] = _find_function(self.function, job)
        bindings.read_function(func)
        if func.__globals__.get(SHIPPED):
            # a def that arrived by value (another process's definition, overdub.travel): its globals are its
            # own, not the module's that the facts name -- the entry cannot be checked against it
            return f"{func.__module__}.{func.__qualname__} here arrived by value, not from its module"
        if function_digest(func) == self.digest:
            return None
        return f"the code of {func.__module__}.{func.__qualname__} changed"

    def describe(self) -> str:
        return f"the function {self.function!r:.80}"


@dataclasses.dataclass(frozen=True, slots=True)
class GlobalFact(Fact):
    """The global ``name`` of ``namespace`` (a module, or the globals of a function compiled before it), read
    with or without the builtins behind it, had a value ``digest``."""

    namespace: Locator
    name: str
    with_builtins: bool
    digest: str

    what: typing.ClassVar[str] = "the global"

    @staticmethod
    def digest_of(value: object) -> str:
        return value_digest(value)

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        if self.namespace[0] == "module" and not self.with_builtins:  # an attribute, perhaps lazy (PEP 562)
            value = bindings.read_attribute(sys.modules[self.namespace[1]], self.name)
        else:
            value = bindings.read(_find_namespace(self.namespace, functions), self.name, self.with_builtins)
        if self.digest_of(value) == self.digest:
            return None
        return f"{self.what} {self.name} of {self.namespace[-1]!r} changed"

    def describe(self) -> str:
        return f"{self.what} {self.name} of {self.namespace!r:.80}"


@dataclasses.dataclass(frozen=True, slots=True)
class EmbeddedFact(GlobalFact):
    """The global ``name`` of ``namespace`` (as for :class:`GlobalFact`) held a value numba compiles or types
    itself -- an ``@njit`` function, an ``@overload``-ed or ``@intrinsic`` object -- whose code and everything
    it reads, transitively, had the digest ``digest`` (:func:`embedded_digest`)."""

    what: typing.ClassVar[str] = "the code numba compiles for the global"

    @staticmethod
    def digest_of(value: object) -> str:
        return embedded_digest(value)[0]


# --- record and replay ----------------------------------------------------------------------------------


def _leaves(node: world.Node) -> list[world.Node]:
    """The edges of ``node`` and, through each compiled method instance it used, theirs: what it depends on."""
    seen: dict[world.Node, None] = {}

    def walk(n: world.Node) -> None:
        for edge in n.edges:
            if isinstance(edge, Guarded):
                walk(edge)
            else:
                seen.setdefault(edge, None)

    walk(node)
    return list(seen)


def record(job: CompileJob, kernel: Kernel) -> list[Fact]:
    """The facts of the compiled ``kernel``: dispatch answers, then code, then globals (the order
    :func:`replay` finds them in). Raises :class:`Uncacheable`."""
    leaves = _leaves(kernel)
    facts: list[Fact] = []
    methods: dict[int, Locator] = {}  # id of a method's def -> the def's locator
    namespaces: dict[int, Locator] = {}  # id of a compiled def's globals -> the def's locator
    compiled: set[pytypes.FunctionType] = set()
    for node in leaves:
        if isinstance(node, MethodMatch):
            table = _table_ref(node.table)
            facts.append(DispatchFact(table, _portable_types(node.argtypes), _answer_digest(node)))
            for method in [node.method] if node.method is not None else []:
                methods.setdefault(id(method.func), ("method", table, _signature_digest(method.sig)))
        elif isinstance(node, EmptyTable):
            facts.append(EmptyTableFact(_table_ref(node.table)))
    for node in leaves:
        if isinstance(node, FunctionState):
            func = node.function()
            if func is None:
                raise Uncacheable("a function it compiled no longer exists")
            ref = _function_ref(func, job, methods)
            facts.append(FunctionFact(ref, function_digest(func)))
            namespaces.setdefault(id(func.__globals__), ref)
            compiled.add(func)
    typed_by: set[tuple[str, str]] = set()  # the typing code (overloads, intrinsics) the facts digest
    for node in leaves:
        if isinstance(node, Binding):
            _check_compiled(node.value, compiled)
            namespace = _namespace_ref(node.namespace, namespaces)
            if embeds_numba_code(node.value, compiled):
                digest, typing = embedded_digest(node.value)
                typed_by |= typing
                facts.append(EmbeddedFact(namespace, node.name, node.with_builtins, digest))
            else:
                facts.append(GlobalFact(namespace, node.name, node.with_builtins, value_digest(node.value)))
        elif isinstance(node, CellBinding):
            raise Uncacheable(f"it reads {node.describe()} (a closure's cell)")
        elif isinstance(node, ContextShape):
            if not any(node is ctx.shape for ctx in job.chain):
                raise Uncacheable(f"it depends on {node.context!r}, outside its chain")
        elif _is_struct_definition(node):
            struct_type = node.cls.__overdub_type__
            facts.append(StructFact(_ref(node.cls), _struct_digest(struct_type)))
        elif not isinstance(node, (MethodMatch, FunctionState, EmptyTable)):
            raise Uncacheable(f"it depends on {node.describe()}")
    for need in kernel.needs:
        if isinstance(need, bridge.TypedByTemplates) and not _digested(need, typed_by):
            raise Uncacheable(f"numba's typing by {need.module}.{need.qualname} is in it: that code is no fact")
    return facts


def _digested(need: bridge.TypedByTemplates, typed_by: set[tuple[str, str]]) -> bool:
    """Is the typing code that typed a call or an attribute read known to another process: a versioned
    package's, or an installed package's that a fact digests (not the user's own: such code is not cached)?"""
    module = need.module
    return is_versioned_module(module) or ((module, need.qualname) in typed_by and is_library_module(module))


class _StructDefinition(Protocol):
    """What this module reads of :class:`overdub.structs.StructDefinition`: the ``@od.struct`` class (which
    overdub.structs gives its ``__overdub_type__`` and ``__overdub_definition__``)."""

    cls: Any


def _is_struct_definition(node: object) -> TypeGuard[_StructDefinition]:
    """Is ``node`` the class statement of an ``@od.struct`` (:class:`overdub.structs.StructDefinition`, a
    module above this one: known by what it holds)?"""
    cls = getattr(node, "cls", None)
    return cls is not None and getattr(cls, "__overdub_definition__", None) is node


def _portable_types(argtypes: Signature) -> Signature:
    """``argtypes``, when another process unpickles them as equal types (numba's types are interned by their
    key; a type holding a Python object -- a function passed as a value -- unpickles as another one)."""
    try:
        if pickle.loads(pickle.dumps(argtypes)) == argtypes:
            return argtypes
    except Exception:  # whatever pickling such a type raises
        pass
    raise Uncacheable(f"the argument types {argtypes} do not survive pickling")


def _check_compiled(value: object, compiled: set[pytypes.FunctionType]) -> None:
    """A function of the user's own code that a compile read but did not compile was typed by numba itself
    (an ``@overload`` of it, say), from code no fact records: such a compile is not cached."""
    function = bridge.python_function(value)
    if function is not None and function not in compiled and not is_library_module(function.__module__):
        raise Uncacheable(f"{function.__module__}.{function.__qualname__} was read but not compiled by overdub")


def replay(job: CompileJob, facts: list[Fact]) -> str | None:
    """Re-check each fact in this process through the calls a compile makes (so the node being built on this
    thread gets the same edges); None when all hold, else which one does not."""
    functions: dict[Locator, pytypes.FunctionType] = {}
    for fact in facts:
        if not isinstance(fact, Fact):  # an entry of an older format: a miss
            return f"a fact of another format ({type(fact).__name__}) cannot be checked here"
        try:
            changed = fact.check(job, functions)
        except Exception as exc:  # not importable here, a method gone, an undigestable new value
            return f"{fact.describe()} cannot be checked here ({type(exc).__name__}: {exc})"
        if changed:
            return changed
    return None
