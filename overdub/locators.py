"""Locators: how another process finds again a thing a compile consulted -- plain data, a kind (a string)
followed by strings and locators.

An object is found by its module and qualified name, else by a variable of its module (or of a namespace
module registered under it) that holds it; a context by the variable naming it, or a target's root by its
name; a method table by its owner (a generic function, a context and a callee, another registry's variable
and a callee); a function as the kernel itself, a method of a table (by its signature) or an importable
name; a namespace as a module's, or the globals of a function found before it. Each ``*object_ref`` makes a
locator here and raises :class:`~overdub.digests.Uncacheable` where there is none; each ``find_*`` resolves
one in this process, among the modules already imported: a check never imports anything.
"""

from __future__ import annotations

import contextlib
import sys
import types as pytypes
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np

from . import bridge
from .context import Context
from .digests import Uncacheable, signature_digest
from .registry import GenericFunction, MethodTable, TableOwner
from .roots import TargetRoot
from .runtime import runtime

if TYPE_CHECKING:
    from .job import CompileJob

__all__ = [
    "Locator",
    "resolve_imported",
    "object_ref",
    "context_ref",
    "table_ref",
    "find_table",
    "function_ref",
    "find_function",
    "namespace_ref",
    "find_namespace",
]

Locator: TypeAlias = tuple[Any, ...]
"""How another process finds a thing again: plain data, a kind (a string) followed by strings and locators."""


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


# obj -> the variable object_ref found it in (re-checked before reuse); held weakly: an entry dies with it
_found_variables: weakref.WeakKeyDictionary[object, tuple[str, str]] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._found_variables", _found_variables)


def object_ref(obj: object) -> tuple[str, str]:
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
    namespace: :func:`object_ref` remembers the answer -- the registries of od.method's and the dunders' tables are
    found this way in every compile -- and checks it still holds before reusing it)."""
    if isinstance(module, str):
        for name in [module] + sorted(n for n in list(sys.modules) if n.startswith(module + ".")):
            variables = [k for k, v in vars(sys.modules.get(name, _NOWHERE)).items() if v is obj]
            if variables and _resolves_to(name, min(variables), obj):
                return name, min(variables)
    raise Uncacheable(f"{obj!r:.80} cannot be found by name in another process")


def context_ref(ctx: Context) -> Locator:
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


def table_ref(table: MethodTable) -> Locator:
    owner = table.owner
    if owner is None:
        raise Uncacheable(f"it consulted {table.name}, a table no other process can find")
    if isinstance(owner, GenericFunction):
        return ("generic", *object_ref(owner))
    registry, callee = owner
    if isinstance(registry, Context):
        return ("overdub", context_ref(registry), object_ref(callee))
    # another registry of tables per callee, a variable of its module (od.method's, the dunders')
    return ("registry", object_ref(registry), object_ref(callee))


def find_table(ref: Locator, job: CompileJob) -> MethodTable:
    if ref[0] == "generic":
        return cast(GenericFunction, resolve_imported(ref[1], ref[2])).table
    if ref[0] == "registry":
        registry = cast(TableOwner, resolve_imported(*ref[1]))
        return registry.table(cast("Callable[..., Any]", resolve_imported(*ref[2])))
    return _find_context(ref[1], job).table(resolve_imported(*ref[2]))


def function_ref(func: pytypes.FunctionType, job: CompileJob, methods: dict[int, Locator]) -> Locator:
    if func is job.func:
        return ("kernel",)
    if id(func) in methods:
        return methods[id(func)]
    return ("ref", *object_ref(func))


def find_function(ref: Locator, job: CompileJob) -> pytypes.FunctionType:
    """The def a locator names (a changed one -- no def now -- fails its fact's check)."""
    if ref[0] == "kernel":
        return cast(pytypes.FunctionType, job.func)
    if ref[0] == "method":
        table = find_table(ref[1], job)
        return cast(pytypes.FunctionType, next(m.func for m in table.methods if signature_digest(m.sig) == ref[2]))
    found = resolve_imported(ref[1], ref[2])
    return cast(pytypes.FunctionType, bridge.python_function(found) or found)


def namespace_ref(namespace: dict[str, Any], functions: dict[int, Locator]) -> Locator:
    name = namespace.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is not None and vars(module) is namespace:
        return ("module", name)
    if id(namespace) in functions:
        return ("globals", functions[id(namespace)])
    raise Uncacheable(f"a namespace of {name!r} that is not its module's")


def find_namespace(ref: Locator, functions: dict[Locator, pytypes.FunctionType]) -> dict[str, Any]:
    if ref[0] == "module":
        return vars(sys.modules[ref[1]])
    return functions[ref[1]].__globals__
