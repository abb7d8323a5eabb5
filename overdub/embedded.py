"""Code numba compiles or types itself, digested with everything it embeds.

A function overdub compiles is a fact of its own, and so is each global it reads. Code numba compiles or
types itself -- an @njit function (numba's typing has it registered, so overdub delegates the call), an
@overload's or @intrinsic's definition, the values all that code reads -- leaves no edge: numba freezes
what it reads into the kernel. Such a value is digested with everything it embeds, transitively: the code,
the defaults and closure, each global the code names (for a module, the attributes the code could read),
and the Python functions numba's registrations of it run. Only objects of the versioned packages
(:func:`~overdub.libraries.is_versioned_module`) are known by name. The same digest, without the typing
code, tells two copies of a definition that arrived by value apart (:func:`overdub.travel.interning.interned`).
"""

from __future__ import annotations

import types as pytypes
from typing import Any, cast

from . import bindings, bridge, rewrite
from .digests import Uncacheable, data_digest, function_digest, library_object_digest, parts_digest, value_digest
from .libraries import is_versioned_module
from .registry import GenericFunction

__all__ = ["embeds_numba_code", "embedded_digest", "all_names", "target_digest"]


def embeds_numba_code(value: object, compiled: set[pytypes.FunctionType]) -> bool:
    """Does compiled code reading ``value`` embed what numba makes of it (code overdub did not compile, an
    object numba types by its registrations), rather than the value itself or a callee overdub compiled?"""
    if value is bindings._MISSING or data_digest(value) is not None:
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


def all_names(code: pytypes.CodeType) -> frozenset[str]:
    """The names ``code`` and the code nested in it use: globals and every attribute it could read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= all_names(const)
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
        data = "missing" if value is bindings._MISSING else data_digest(value)
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
        return parts_digest("module", module.__name__, attributes)

    def _object(self, value: object) -> str:
        function = bridge.python_function(value)
        if function is not None:
            options = getattr(value, "targetoptions", None)  # a dispatcher's: fastmath, boundscheck, ...
            parts = [self._function(function), repr(sorted(options.items())) if isinstance(options, dict) else ""]
        else:
            parts = [library_object_digest(value)]  # raises for an object of the user's own code
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
        return parts_digest("embedded", *parts)

    def _function(self, func: pytypes.FunctionType) -> str:
        """A function's code, defaults, closure and every global its code names."""
        code = func.__code__
        names = all_names(code)
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
        return parts_digest("function", *parts)


def _imports_given(func: pytypes.FunctionType) -> list[tuple[str, object]]:
    """The modules a def that arrived by value imports in its body as its sender had them (the ``modules`` of
    its own ``__import__``, :class:`overdub.byvalue.Importer`): part of what it reads."""
    builtins_ = cast(Any, func).__builtins__  # (typeshed lacks FunctionType.__builtins__)
    modules = getattr(builtins_.get("__import__"), "modules", None) if type(builtins_) is dict else None
    return sorted(modules.items()) if isinstance(modules, dict) else []


def target_digest(value: object) -> str:
    """What a context forwards a call to or replaces an object with: an object numba compiles itself (an
    ``@njit`` function, say) with everything it embeds, since no fact records it."""
    if bridge.python_function(value) is value or not embeds_numba_code(value, set()):
        return value_digest(value)  # a def: overdub compiles it, and its code and globals are facts
    return embedded_digest(value)[0]
