"""A compile as one value: :class:`CompileJob` -- the def, the argument types, the context chain (whose last
element names the target) and keyword argument types -- and the error a compile fails with,
:class:`CompileError`.

A job keys the runtime's caches of method instances (:mod:`overdub.instances`), kernels
(:mod:`overdub.compiler`) and host calls (:mod:`overdub.host`); it holds its function weakly, so a cache
entry dies with its function. Equal jobs compile to the same code in the same world. What is compiled in a
chain depends on each context of it (:func:`consult_chain`). A CompileError made from one of numba's errors
is also an instance of that error's class, so code written for numba still catches it; it pickles as the
pair (numba's class, message), remade on arrival.
"""

from __future__ import annotations

import types as pytypes
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from . import world
from .runtime import runtime

if TYPE_CHECKING:
    from .context import Context
    from .roots import TargetRoot
    from .targets import Target

__all__ = [
    "CompileJob",
    "CompileError",
    "Chain",
    "compile_error",
    "consult_chain",
    "chain_name",
    "type_list",
    "also_numba_error",
]

Chain = tuple["Context", ...]  # the contexts a function is compiled in, the target's root last
_E = TypeVar("_E", bound=BaseException)


class CompileError(Exception):
    """A kernel could not be compiled; the message is numba's, with the kernel's source lines.

    Where numba raised one of its own errors, the CompileError is also an instance of that error's class
    (``numba.core.errors.TypingError``, ...), so code written for numba -- ``except TypingError`` -- still
    catches it."""

    details: str = ""
    """numba's report of the failure, whole (the message gives a plain account of the failures a newcomer's
    kernel meets: a dict, an undefined name...)."""

    def __reduce__(self) -> tuple[Callable[..., CompileError], tuple[object, ...]]:
        return compile_error, (_NUMBA_CLASS.get(type(self)), str(self), self.details)


# numba error class -> the CompileError subclass that is also one
_AS_NUMBA_CLASS: dict[type[BaseException], type[CompileError]] = {}
_NUMBA_CLASS: dict[type[CompileError], type[BaseException]] = {}  # and back
runtime.register_cache(f"{__name__}._AS_NUMBA_CLASS", _AS_NUMBA_CLASS, kept="the classes made are definitions")
runtime.register_cache(f"{__name__}._NUMBA_CLASS", _NUMBA_CLASS, kept="the classes made are definitions")


def compile_error(numba_class: type[BaseException] | None, message: str, details: str | None = None) -> CompileError:
    """A CompileError carrying ``message`` (and ``details``: numba's whole report, by default the message),
    also an instance of ``numba_class`` when that is given."""
    error = _made(numba_class, message)
    error.details = message if details is None else details
    return error


def _made(numba_class: type[BaseException] | None, message: str) -> CompileError:
    if numba_class is None:
        return CompileError(message)
    cls = _AS_NUMBA_CLASS.get(numba_class)
    if cls is None:
        cls = type(
            "CompileError",
            (CompileError, numba_class),
            {"__module__": CompileError.__module__, "__qualname__": "CompileError"},
        )
        cls = _AS_NUMBA_CLASS.setdefault(numba_class, cls)
        _NUMBA_CLASS[cls] = numba_class
    return cls(message)


# (an error's class, numba's error class) -> the subclass of the first that is also the second
_ALSO_NUMBA: dict[tuple[type[BaseException], type[BaseException]], type[BaseException]] = {}
runtime.register_cache(f"{__name__}._ALSO_NUMBA", _ALSO_NUMBA, kept="the classes made are definitions")


def also_numba_error(error: _E, numba_class: type[BaseException]) -> _E:
    """``error`` (message, fields) as an instance of a subclass of its class that is also ``numba_class``: a
    ``MethodError`` a kernel's compile ends with is also numba's ``TypingError``, as numba-cuda's error for a
    call no signature of a device function takes is, so ``except TypingError`` catches it. It pickles as the
    error it was, remade as this on arrival."""
    key = (type(error), numba_class)
    cls = _ALSO_NUMBA.get(key)
    if cls is None:
        base = type(error)
        cls = type(
            base.__name__,
            (base, numba_class),
            {"__module__": base.__module__, "__qualname__": base.__qualname__, "__reduce__": _reduce_also},
        )
        cls = _ALSO_NUMBA.setdefault(key, cls)
    also = cast(_E, cls.__new__(cls))
    also.args, also.__dict__ = error.args, {**vars(error), "contexts": [], "loc": None}  # numba's error fields
    return also


def _reduce_also(error: BaseException) -> tuple[Callable[..., BaseException], tuple[object, ...]]:
    base, numba_class = next(key for key, cls in _ALSO_NUMBA.items() if cls is type(error))
    plain = base.__new__(base)
    plain.args, plain.__dict__ = error.args, {k: v for k, v in vars(error).items() if k not in ("contexts", "loc")}
    return _remade_also, (plain, numba_class)


def _remade_also(error: BaseException, numba_class: type[BaseException]) -> BaseException:
    return also_numba_error(error, numba_class)


def type_list(argtypes: Sequence[object]) -> str:
    return ", ".join(str(t) for t in argtypes)


def chain_name(chain: Chain) -> str:
    return "/".join(ctx.name for ctx in chain)


@dataclass(frozen=True)
class CompileJob:
    """What a compile depends on besides the edges it records (GPUCompiler's ``CompilerJob``): the function,
    held weakly, the argument types, the context chain -- ending in the target's root -- and the types of
    keyword arguments. Equal jobs compile to the same code in the same world."""

    # the canonical weak reference to the def (compared by the def's identity)
    func_ref: weakref.ref[pytypes.FunctionType]
    argtypes: tuple[object, ...]  # numba types
    chain: Chain
    kwtypes: tuple[tuple[str, object], ...] = ()  # (name, numba type), by name
    name: str = ""

    @classmethod
    def of(
        cls,
        func: pytypes.FunctionType,
        argtypes: Sequence[object],
        chain: Chain,
        kwtypes: Mapping[str, object] | None = None,
    ) -> CompileJob:
        return cls(weakref.ref(func), tuple(argtypes), chain, tuple(sorted((kwtypes or {}).items())), func.__qualname__)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CompileJob)
            and self.func_ref == other.func_ref
            and (self.argtypes, self.chain, self.kwtypes) == (other.argtypes, other.chain, other.kwtypes)
        )

    def __hash__(self) -> int:
        return hash((self.func_ref, self.argtypes, self.chain, self.kwtypes))

    @property
    def func(self) -> Callable[..., Any]:
        """The def (alive while its job is used: the caches drop the jobs of a def that died). Typed as a
        callable: mypy reads a property of type FunctionType as a bound method (FunctionType.__get__)."""
        return cast(pytypes.FunctionType, self.func_ref())

    @property
    def target(self) -> Target:
        return cast("TargetRoot", self.chain[-1]).target

    def call(self) -> str:
        return f"{self.name}({type_list(self.argtypes)})"


def consult_chain(chain: Chain) -> None:
    """What is compiled in ``chain`` depends on each context's parent, forwards and replacements."""
    for ctx in chain:
        world.consult(ctx.shape)
