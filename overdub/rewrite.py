"""The context-rewriting pass: a function, as compiled in a context chain.

Like Cassette's overdub pass, it reroutes every call a function makes through the context -- but it does so
on the function's *names* rather than its IR: the function is cloned with a globals dict in which each
callable it names is an :class:`Overdubbed` (the callee, seen from a context chain) and each module it
names a :class:`ModuleProxy` (whose callable attributes become Overdubbed when typing reads them). Which
implementation a call reaches is decided later, during numba's type inference, where the argument types are
known (see :mod:`overdub.resolve`). Every global the clone reads becomes an edge of the node being built
(:mod:`overdub.bindings`).

Free variables get the same treatment through fresh closure cells, so kernels defined inside functions
behave like module-level ones.
"""

from __future__ import annotations

import builtins
import dis
import types as pytypes
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import bindings
from .runtime import runtime
from .types import is_overdubbable

if TYPE_CHECKING:
    from numba.core import types as nt

    from .context import Context

CHAIN_MARK = "__overdub_chain__"
"""The global a rewritten function carries its chain in (so numba passes know overdub compiled it)."""


class Overdubbed:
    """A callee as seen from a context chain: calling it inside a kernel asks the chain first -- its hooks
    observe the call, its overdubs may take it."""

    __slots__ = ("chain", "callee", "hooked_calls", "__weakref__")

    observed = True  # the chain's hooks observe calls of it
    dispatched = True  # the chain's overdubs and the callee's methods decide what a call runs

    def __init__(self, chain: tuple[Context, ...], callee: Callable[..., Any]) -> None:
        self.chain, self.callee = chain, callee
        # the generated functions running its calls with hooks, by the hooks and the call's shape
        self.hooked_calls: dict[tuple[object, ...], Callable[..., Any]] | None = None

    def __repr__(self) -> str:
        return (
            f"overdub({getattr(self.callee, '__qualname__', self.callee)!r} in {'/'.join(c.name for c in self.chain)})"
        )


class Unobserved(Overdubbed):
    """A callee whose calls the chain's hooks do not observe again: what a hooked call runs between its
    prehooks and posthooks (resolved as the call itself would be)."""

    __slots__ = ()
    observed = False


class Direct(Overdubbed):
    """A def compiled in a chain as it is, with no dispatch and no hooks: a hook method, called by a hooked
    call."""

    __slots__ = ()
    observed = dispatched = False


class ModuleProxy:
    """A module as seen from a context chain: attribute reads are globals read, callables are Overdubbed."""

    __slots__ = ("chain", "module", "__weakref__")

    def __init__(self, chain: tuple[Context, ...], module: pytypes.ModuleType) -> None:
        self.chain, self.module = chain, module

    def attribute(self, name: str) -> object:
        """The rewritten value of ``module.name``, recorded as an edge on the module's global ``name``."""
        value = bindings.read_attribute(self.module, name)
        if value is bindings._MISSING:
            raise AttributeError(f"module {self.module.__name__!r} has no attribute {name!r}")
        return substitute(value, self.chain, f"{self.module.__name__}.{name}")

    def __repr__(self) -> str:
        return f"<module {self.module.__name__} in {'/'.join(c.name for c in self.chain)}>"


def substitute(value: object, chain: tuple[Context, ...], name: str = "") -> object:
    """What ``value`` (the global or captured variable ``name``) becomes inside a function compiled in ``chain``."""
    if isinstance(value, np.ndarray):
        by_reference = held_data(value, chain, name)
        if by_reference is not value:
            return by_reference
    for ctx in chain:
        replacement = ctx.replacement(value)
        if replacement is not None:
            value = replacement
            break
    if isinstance(value, tuple):
        return held_data(value, chain, name)
    kind: type[Overdubbed | ModuleProxy]
    if isinstance(value, pytypes.ModuleType):
        kind = ModuleProxy
    elif is_overdubbable(value):
        kind = Overdubbed
    else:
        return value
    return interned(kind, chain, value)


def held_data(value: object, chain: tuple[Context, ...], name: str = "") -> object:
    """``value`` -- a global, a captured variable, a default -- with each numpy array in it (itself, or an item
    of a tuple, nested tuples and namedtuples included) as a function compiled in ``chain`` reads it.

    A target that reads a global array live (the CPU: targets/cpu/globalarrays.py) gets its reference; an array
    numba freezes into the code as a constant (numba-cuda: into constant memory; the CPU: an array of other
    dtypes) is never silently stale: its contents are an edge, checked at each launch. An array in a tuple is
    read as the same array bound to a global of its own is (numba freezes a tuple's arrays as constants too);
    the tuple is rebuilt only where one of its items became a reference. Other values are returned as they are.
    """
    if isinstance(value, np.ndarray):
        by_reference = getattr(getattr(chain[-1], "target", None), "global_array", None)
        plain = type(value) is np.ndarray or getattr(value, "overdub_plain_memory", False)  # overdub.cuda's arrays
        if by_reference is not None and plain and value.dtype.kind in "biufc":
            return by_reference(value)
        bindings.read_array(value, name or f"of shape {value.shape}")
        return value
    if not isinstance(value, tuple):
        return value
    fields = getattr(type(value), "_fields", None)  # a namedtuple's
    if not name:
        labels = [""] * len(value)
    elif fields is not None:
        labels = [f"{name}.{field}" for field in fields]
    else:
        labels = [f"{name}[{i}]" for i in range(len(value))]
    items = [held_data(item, chain, label) for item, label in zip(value, labels)]
    if all(new is old for new, old in zip(items, value)):
        return value
    return cast(Any, value)._make(items) if fields is not None else tuple(items)  # a namedtuple's _make


def interned(kind: type[Overdubbed | ModuleProxy], chain: tuple[Context, ...], value: Any) -> Any:
    """The one ``kind(chain, value)`` proxy while compiled code refers to it (numba then sees one type per
    callee); the proxy holds its value, so the value's id stays unique for as long as the entry exists."""
    key = (kind, chain, id(value))
    proxy = runtime.proxies.get(key)
    if proxy is None:
        proxy = runtime.proxies.setdefault(key, kind(chain, value))
    return proxy


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"})


# code -> its global names
_global_names: weakref.WeakKeyDictionary[pytypes.CodeType, tuple[str, ...]] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._global_names", _global_names)


def global_names(code: pytypes.CodeType) -> tuple[str, ...]:
    """The global names ``code`` (and the code it nests) reads or writes, first use first -- not attribute
    or method names, which share ``co_names`` with them. Decoded once per code object (code is immutable)."""
    names = _global_names.get(code)
    if names is None:
        names = _global_names[code] = tuple(dict.fromkeys(_decoded_global_names(code)))
    return names


def _decoded_global_names(code: pytypes.CodeType) -> Iterator[str]:
    for instruction in dis.get_instructions(code):
        if instruction.opname in _GLOBAL_OPS:
            yield instruction.argval
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            yield from _decoded_global_names(const)


def _rewrite_cell(
    func: pytypes.FunctionType, index: int, cell: pytypes.CellType, chain: tuple[Context, ...]
) -> pytypes.CellType:
    label = f"{func.__qualname__}.{func.__code__.co_freevars[index]}"
    try:
        contents = bindings.read_cell(cell, label)
    except ValueError:  # not yet bound
        return pytypes.CellType()
    return pytypes.CellType(substitute(contents, chain, label))


def rewrite(func: pytypes.FunctionType, chain: tuple[Context, ...], given: int = 0) -> pytypes.FunctionType:
    """Clone ``func`` so that every global and free variable it names is seen from ``chain``.

    Everything the clone depends on becomes an edge of the node being built on this thread: ``func``'s code
    and defaults, each global it reads and each closure cell. In a chain with state (a launch passing
    ``state=``), the clone takes the state as a hidden first parameter (:func:`with_state_parameter`).
    ``given``: how many of the clone's parameters every call passes (a kernel's: its argument types), whose
    defaults are never compiled in (:func:`_defaults_read`).
    """
    bindings.read_function(func)
    namespace = func.__globals__
    new_globals = {"__builtins__": builtins, "__name__": namespace.get("__name__"), CHAIN_MARK: chain}
    for name in global_names(func.__code__):
        if bindings.lookup(namespace, name) is bindings._MISSING:
            continue  # unbound (numba will say so)
        new_globals[name] = substitute(bindings.read(namespace, name), chain, name)
    closure = None
    if func.__closure__:
        closure = tuple(_rewrite_cell(func, i, cell, chain) for i, cell in enumerate(func.__closure__))
    code = func.__code__
    hidden = state_type(chain) is not None and not takes_state(func)
    defaults, kwdefaults = _defaults_read(func, chain, given - hidden)
    if hidden:
        code = with_state_parameter(code, func.__qualname__)
    clone = pytypes.FunctionType(code, new_globals, func.__name__, defaults, closure)
    clone.__qualname__ = func.__qualname__
    clone.__module__ = func.__module__
    clone.__kwdefaults__ = kwdefaults
    return clone


def _defaults_read(
    func: pytypes.FunctionType, chain: tuple[Context, ...], given: int = 0
) -> tuple[tuple[Any, ...] | None, dict[str, Any] | None]:
    """``func``'s defaults and keyword-only defaults with the arrays in them read as a global's are
    (:func:`held_data`): numba compiles a default a call leaves out in as a constant (its ``Omitted``). The
    defaults of the first ``given`` parameters, which every call passes (a kernel launched with its defaults
    as arguments: overdub.call.passed_defaults), are left as they are: no edge on what is never compiled in."""
    defaults, kwdefaults = func.__defaults__, func.__kwdefaults__
    code = func.__code__
    if defaults:
        first = code.co_argcount - len(defaults)
        names = code.co_varnames[first : code.co_argcount]
        read = tuple(
            held_data(v, chain, f"{func.__qualname__}'s default {n}") if first + i >= given else v
            for i, (n, v) in enumerate(zip(names, defaults))
        )
        defaults = defaults if all(new is old for new, old in zip(read, defaults)) else read
    if kwdefaults:
        read_kw = {n: held_data(v, chain, f"{func.__qualname__}'s default {n}") for n, v in kwdefaults.items()}
        kwdefaults = kwdefaults if all(read_kw[n] is v for n, v in kwdefaults.items()) else read_kw
    return defaults, kwdefaults


# --- the hidden state parameter -------------------------------------------------------------------------
# A launch in a context with state passes the state as a hidden first argument of the kernel and of every
# function compiled for that launch (Cassette's metadata, passed as data: one compile per state *type*).
# The clone of a function gets the parameter here; the call of a compiled function passes its caller's
# (overdub.bridge.hidden), and od.state() returns it.

STATE_PARAMETER = "__overdub_state__"
_FAST_LOCAL_OPS = frozenset(dis.haslocal) | frozenset(dis.hasfree)  # opargs indexing the fast locals
_TWO_LOCAL_OPS = frozenset({"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"})


def state_type(chain: tuple[Context, ...]) -> nt.Type | None:
    """The numba type of the state of the launch a chain compiles for (its root says), or None."""
    state: nt.Type | None = getattr(chain[-1], "state", None)
    return state


def takes_state(func: object) -> bool:
    """Does ``func`` take the state as its own first parameter (``od.state``'s device function)?"""
    return getattr(func, "__overdub_takes_state__", False)


def with_state_parameter(code: pytypes.CodeType, name: str) -> pytypes.CodeType:
    """``code`` taking one more, positional-only, first parameter -- the state -- that its body ignores.

    CPython 3.11-3.13 internals: each local is an index into the frame's fast locals (parameters first, then the
    other locals, cells and free variables), so every instruction naming one moves up by one. An index of
    255 would need an EXTENDED_ARG prefix, which shifts jump targets; such functions are refused."""
    raw = bytearray(code.co_code)
    for instruction in dis.get_instructions(code):
        if instruction.opcode not in _FAST_LOCAL_OPS:
            continue
        index = cast(int, instruction.arg)  # an instruction naming a local has an argument
        if instruction.opname in _TWO_LOCAL_OPS:  # CPython 3.13: two 4-bit indices in one argument
            high, low = (index >> 4) + 1, (index & 15) + 1
            arg = (high << 4) | low if high < 16 and low < 16 else 256
        else:
            arg = index + 1
        if arg > 255:
            raise NotImplementedError(
                f"{name} has too many local variables to be compiled in a context with state "
                f"(its bytecode would need longer arguments)"
            )
        raw[instruction.offset + 1] = arg
    return code.replace(
        co_code=bytes(raw),
        co_argcount=code.co_argcount + 1,
        co_posonlyargcount=code.co_posonlyargcount + 1,
        co_nlocals=code.co_nlocals + 1,
        co_varnames=(STATE_PARAMETER,) + code.co_varnames,
    )
