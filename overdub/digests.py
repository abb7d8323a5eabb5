"""Content digests: what a thing a compile consulted *was*, as a string equal in two processes exactly when
compiled code reading it is the same code.

Code by its bytecode, constants and names -- not its file, line numbers or the file's time, so an edit
elsewhere in its file is no change; data by its bits; a generic function or a module by its name (its
methods and attributes are facts of their own); a numba type by its repr and the layout of each struct in it;
a dispatch answer by the signature and code of the method it picked. Objects of installed packages
(numba's, numpy's, overdub's, the standard library's) are digested by their names: their code is covered by
the package versions in the cache key. What has no digest -- an object of the user's own class, a value with
no name another process could know it by -- raises :class:`Uncacheable`: such a compile is not stored.
"""

from __future__ import annotations

import hashlib
import struct
import types as pytypes
import weakref
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from . import bindings, bridge
from .libraries import is_library_module
from .registry import GenericFunction, Method, MethodMatch
from .runtime import runtime
from .types import StructType, type_name

__all__ = [
    "Uncacheable",
    "code_digest",
    "function_digest",
    "value_digest",
    "type_digest",
    "struct_digest",
    "signature_digest",
    "answer_digest",
]


class Uncacheable(Exception):
    """Something a compile consulted has no name another process can find it by, or no content digest."""


def parts_digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:40]


_code_digests: weakref.WeakKeyDictionary[pytypes.CodeType, str] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._code_digests", _code_digests)


def code_digest(code: pytypes.CodeType) -> str:
    """What a code object computes: bytecode, constants (nested code too), names, flags and arity -- not
    where it is (file, first line, line table), so an edit elsewhere in its file is no change."""
    digest = _code_digests.get(code)
    if digest is None:
        consts = tuple(code_digest(c) if isinstance(c, pytypes.CodeType) else value_digest(c) for c in code.co_consts)
        digest = _code_digests[code] = parts_digest(
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
    return parts_digest(
        "function",
        func.__module__,
        func.__qualname__,
        code_digest(func.__code__),
        value_digest(func.__defaults__),
        value_digest(tuple(kwdefaults)),
    )


def data_digest(value: Any) -> str | None:
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
        return parts_digest(
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
    data = data_digest(value)
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
    return library_object_digest(value)


def library_object_digest(value: object) -> str:
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
    structs = sorted(struct_digest(s) for s in _structs_in(t, set()))
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


def struct_digest(t: StructType) -> str:
    cls = t.cls
    dtype = cast("np.dtype[Any]", t.numpy_dtype)  # made by overdub.structs with the type
    return parts_digest(
        "struct",
        cls.__module__,
        cls.__qualname__,
        [(n, repr(f)) for n, f in t.fields],
        dtype.descr,
        dtype.itemsize,
        repr(t.params),
    )


def signature_digest(sig: tuple[object, ...]) -> str:
    return ",".join(f"{type_name(t)}" for t in sig)


def _method_digest(method: Method) -> str:
    return f"{signature_digest(method.sig)}={function_digest(method.func)}"


def answer_digest(match: MethodMatch) -> str:
    if match.method is not None:
        return f"method:{_method_digest(match.method)}"
    return f"ambiguous:{sorted(map(_method_digest, match.ambiguous))}" if match.ambiguous else "none"
