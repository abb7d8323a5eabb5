"""Definitions run again unchanged: a notebook cell run a second time, an ``exec`` of the same source, an
``importlib.reload`` of an unchanged module. Each makes new function objects of the same code, which are the
same definitions: nothing they compiled need compile again.

:func:`same_definition` says whether two defs are the same definition: the same code (what it computes, not
where it is: bytecode, constants, names, flags, arity), the same defaults, the same closure cells' contents
and the same globals dict -- so everything they read is the same object, and the edges of what the first
compiled (the bindings it read in that dict) keep watching it. :func:`canonical` maps a def to the first of its
definition, kept while it is the latest of its name in its namespace, so a kernel defined again unchanged finds
the kernels compiled for the first. Generic functions use :func:`same_definition` to leave a method defined
again unchanged in place (:meth:`overdub.registry.GenericFunction.define`).
"""

from __future__ import annotations

import types as pytypes
from typing import Any

from .runtime import runtime

__all__ = ["same_definition", "same_values", "same_member", "canonical"]


def same_code(a: pytypes.CodeType, b: pytypes.CodeType) -> bool:
    """Do two code objects compute the same (their file, first line and line table aside)?"""
    if a is b:
        return True
    if (
        a.co_code != b.co_code
        or a.co_names != b.co_names
        or a.co_varnames != b.co_varnames
        or a.co_freevars != b.co_freevars
        or a.co_cellvars != b.co_cellvars
        or a.co_flags != b.co_flags
        or a.co_argcount != b.co_argcount
        or a.co_posonlyargcount != b.co_posonlyargcount
        or a.co_kwonlyargcount != b.co_kwonlyargcount
        or a.co_qualname != b.co_qualname
        or a.co_exceptiontable != b.co_exceptiontable
        or len(a.co_consts) != len(b.co_consts)
    ):
        return False
    return all(_same_constant(x, y) for x, y in zip(a.co_consts, b.co_consts))


def _same_constant(x: object, y: object) -> bool:
    if isinstance(x, pytypes.CodeType) and isinstance(y, pytypes.CodeType):
        return same_code(x, y)
    if type(x) is not type(y):  # 1, 1.0 and True are equal, and other constants
        return False
    if isinstance(x, tuple):
        assert isinstance(y, tuple)
        return len(x) == len(y) and all(_same_constant(i, j) for i, j in zip(x, y))
    return x is y or _equal(x, y)


def _equal(x: object, y: object) -> bool:
    """``x == y`` for values whose equality is a plain yes (an array's is not: those are compared by identity)."""
    try:
        return bool(x == y) if type(x) in (int, float, complex, str, bytes, bool, type(None), frozenset) else False
    except Exception:  # an equality that cannot say: not the same
        return False


def same_values(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    """Are two tuples of values (defaults) the same values: each the same object, or an equal plain value (a
    number, a string) of the same type?"""
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(x is y or (type(x) is type(y) and _equal(x, y)) for x, y in zip(a, b))


def same_member(a: object, b: object) -> bool:
    """Are two members of a class statement run twice the same: defs of the same definition, the same object,
    or an equal plain value?"""
    if isinstance(a, pytypes.FunctionType) and isinstance(b, pytypes.FunctionType):
        return same_definition(a, b)
    if isinstance(a, (staticmethod, classmethod)) and type(a) is type(b):
        return same_member(a.__func__, b.__func__)
    if isinstance(a, property) and isinstance(b, property):
        return all(same_member(x, y) for x, y in ((a.fget, b.fget), (a.fset, b.fset), (a.fdel, b.fdel)))
    return same_values((a,), (b,))


def _cell_contents(cell: pytypes.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _EMPTY


_EMPTY = object()


def same_definition(a: pytypes.FunctionType, b: pytypes.FunctionType) -> bool:
    """Are ``a`` and ``b`` the same definition, run twice: the same code, defaults and closure contents, in the
    same globals dict?"""
    if a is b:
        return True
    if a.__globals__ is not b.__globals__ or a.__module__ != b.__module__ or a.__qualname__ != b.__qualname__:
        return False
    if not same_code(a.__code__, b.__code__) or not same_values(a.__defaults__, b.__defaults__):
        return False
    kw_a, kw_b = a.__kwdefaults__ or {}, b.__kwdefaults__ or {}
    if kw_a.keys() != kw_b.keys() or not same_values(tuple(kw_a.values()), tuple(kw_b[k] for k in kw_a)):
        return False
    cells_a, cells_b = a.__closure__ or (), b.__closure__ or ()
    return len(cells_a) == len(cells_b) and all(
        _cell_contents(x) is _cell_contents(y) for x, y in zip(cells_a, cells_b)
    )


# (id of a namespace, a def's qualname) -> the first def of the latest definition of that name there: held, so
# that what it compiled stays while the name's definition is unchanged (one def a name; a changed definition
# replaces it, and the old one's kernels go with it)
_latest: dict[tuple[int, str], pytypes.FunctionType] = {}
runtime.register_cache(f"{__name__}._latest", _latest)


def canonical(func: pytypes.FunctionType) -> pytypes.FunctionType:
    """The first def of ``func``'s definition, if ``func`` is that definition run again (the latest def of its
    name in its namespace, unchanged); else ``func``, which becomes the latest. A def of a function body
    (a closure: ``<locals>`` in its name) is its own: each call of the outer function makes one."""
    if "<locals>" in func.__qualname__:
        return func
    key = (id(func.__globals__), func.__qualname__)
    latest = _latest.get(key)
    if latest is func:
        return func
    if latest is not None and same_definition(latest, func):
        return latest
    _latest[key] = func
    return func
