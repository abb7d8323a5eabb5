"""Generic functions, methods and method tables (Julia's method tables, in Python).

A :class:`GenericFunction` owns a :class:`MethodTable`: a list of :class:`Method` s, each a Python def with a
signature of lattice types (:mod:`overdub.types`). Dispatch picks, among the methods applicable to a tuple
of argument types, the unique most specific one; no applicable method is a :class:`MethodError`, several
minimal ones an :class:`AmbiguityError`. Ambiguity is an error, never a guess.

Each dispatch answer, positive or negative, is cached per argument-type tuple as a :class:`MethodMatch`
(Julia's name for the result of a method lookup): a :class:`~overdub.world.Node` that whoever consulted it
(a compiled method instance, a compiled kernel) holds an edge to. Defining a method re-asks only the cached questions the new method applies to, and invalidates
exactly those whose answer changed -- the replaced method's, those the new one now wins, those it makes
ambiguous or resolves -- together with everything built from them.

Thread safety: definitions and cache fills run under :data:`overdub.world.lock`; a cache hit takes no lock.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import sys
import types as pytypes
import typing
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, Protocol, TypeAlias

from . import reruns, world
from .places import place
from .runtime import runtime
from .types import Any, ConcreteType, LatticeType, ValueCheck, as_type, fits_int64, same_type_check, type_name, typeof
from .types import subtype as issubtype

__all__ = [
    "Method",
    "MethodTable",
    "MethodMatch",
    "GenericFunction",
    "MethodError",
    "AmbiguityError",
    "function",
    "which",
    "methods",
    "signature_of",
    "methods_from",
]

# A tuple of lattice types: a method's signature, or the argument types of a call.
Signature: TypeAlias = tuple[LatticeType, ...]

# What an object pickled by reference reduces to: resolve_reference and the module and qualified name it imports.
Reference: TypeAlias = tuple[Callable[[str, str], object], tuple[str, str]]

# A check that other arguments of the same classes have the argument types a host call was dispatched for.
ArgsCheck: TypeAlias = Callable[[tuple[object, ...]], bool]


class TableOwner(Protocol):
    """What owns a table of a callee's methods besides a generic function, as this module reads it: a context
    (its overdubs), od.method's tables, the operator dunders' tables (modules above this one)."""

    def table(self, callee: Callable[..., typing.Any]) -> MethodTable: ...


# Who a method table belongs to, for pickling a method by reference: a generic function, or (owner, callee).
Owner: TypeAlias = "GenericFunction | tuple[TableOwner, Callable[..., typing.Any]]"


class MethodError(TypeError):
    """No method applies to the argument types of a call."""

    def __init__(self, name: str, argtypes: Signature, candidates: Iterable[Method | MethodDescription] = ()) -> None:
        super().__init__(name, argtypes, candidates)
        self.name, self.argtypes, self.candidates = name, argtypes, tuple(candidates)
        self.call_site: str | None = None  # "kernel.py:12", filled in by the compiler

    def __reduce__(
        self,
    ) -> tuple[type[MethodError], tuple[str, Signature, tuple[Method | MethodDescription, ...]], dict[str, str | None]]:
        # all fields travel (a worker's error reaches its parent intact); a candidate method travels by
        # reference when its function is importable, else as its description
        return (
            type(self),
            (self.name, self.argtypes, tuple(map(_portable, self.candidates))),
            {"call_site": self.call_site},
        )

    def headline(self) -> str:
        return f"no method matching {_call_repr(self.name, self.argtypes)}"

    def __str__(self) -> str:
        lines = [self.headline()]
        if self.call_site:
            lines.append(f"  called at {self.call_site}")
        if self.candidates:
            lines.append(self._candidates_title())
            lines += [f"  {m}" for m in self.candidates]
        else:
            lines.append("  (the function has no methods)")
        return "\n".join(lines)

    def _candidates_title(self) -> str:
        return "Candidates:"


class NotArrivedError(MethodError):
    """A call of a function whose definitions, sent to this process with the work, could not be adopted here
    (:mod:`overdub.travel`): the cause, not the methods missing because of it."""

    def __init__(self, name: str, argtypes: Signature, why: str) -> None:
        super().__init__(name, argtypes)
        self.why = why

    def __reduce__(self) -> tuple[typing.Any, ...]:
        return type(self), (self.name, self.argtypes, self.why), {"call_site": self.call_site}

    def __str__(self) -> str:
        where = f" (called at {self.call_site})" if self.call_site else ""
        return (
            f"{self.name}{where}: its definitions, sent to this process (pid {os.getpid()}) with the work, could "
            f"not be adopted here: {self.why}"
        )


class AmbiguityError(MethodError):
    """Several applicable methods, none more specific than all the others."""

    def headline(self) -> str:
        return f"{_call_repr(self.name, self.argtypes)} is ambiguous"

    def _candidates_title(self) -> str:
        return "Ambiguous between (define a method more specific than all of these to resolve it):"


class MethodDescription(str):
    """A method of an error raised elsewhere, whose function could not be pickled by reference."""


def _portable(method: Method | MethodDescription) -> Method | MethodDescription:
    try:
        pickle.dumps(method)
    except Exception:  # anything pickle raises means: not importable here
        return MethodDescription(repr(method))
    return method


def resolve_reference(module: str, qualname: str) -> object:
    """The object importable as ``module`` + ``qualname`` (how generic functions and contexts pickle)."""
    value: object = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def reference_to(obj: object, module: str | None, qualname: str) -> Reference:
    """``(resolve_reference, (module, qualname))`` for pickle, after checking that it finds ``obj``."""
    try:
        found = module is not None and resolve_reference(module, qualname) is obj
    except Exception:  # not importable: say so below
        found = False
    if module is None or not found:
        raise pickle.PicklingError(
            f"cannot pickle {obj!r}: it pickles by reference, and {module}.{qualname} "
            f"does not name it (define it at the top level of an importable module)"
        )
    return resolve_reference, (module, qualname)


def _call_repr(name: str, argtypes: Signature) -> str:
    return f"{name}({', '.join(type_name(t) for t in argtypes)})"


def _location(func: Callable[..., typing.Any]) -> tuple[str, int]:
    code = getattr(func, "__code__", None)
    if code is None:
        return "<unknown>", 0
    return code.co_filename, code.co_firstlineno


def _evaluated(annotation: object, func: Callable[..., typing.Any], scope: Mapping[str, object] | None) -> object:
    """An annotation that is still a string after ``inspect.signature(eval_str=True)``: a quoted one in a module
    under ``from __future__ import annotations`` (``o: "S"`` is stored as ``"'S'"``), evaluated once more, as
    ``typing.get_type_hints`` does."""
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, getattr(func, "__globals__", {}), dict(scope or {}))
    except NameError as exc:
        raise TypeError(f"cannot evaluate the annotations of {func.__qualname__}: {exc}") from None


def signature_of(
    func: Callable[..., typing.Any], scope: Mapping[str, object] | None = None, annotations: bool = True
) -> tuple[tuple[str, ...], Signature, tuple[object, ...]]:
    """The parameter names, lattice signature (unannotated parameters are Any) and default values of a def;
    ``scope`` binds names its string annotations use ahead of its module's (a class being defined).
    ``annotations=False``: not read at all (a signature given instead), every parameter Any."""
    try:
        sig = inspect.signature(func, locals=scope, eval_str=annotations)
    except NameError as exc:
        raise TypeError(f"cannot evaluate the annotations of {func.__qualname__}: {exc}") from None
    names: list[str] = []
    types_: list[LatticeType] = []
    defaults: list[object] = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TypeError(
                f"{func.__qualname__}: parameter {p.name!r} is not a positional parameter; methods "
                f"take positional parameters (with or without defaults), not *args, **kwargs or "
                f"keyword-only ones"
            )
        names.append(p.name)
        types_.append(as_type(_evaluated(p.annotation, func, scope)) if annotations else Any)
        if p.default is not p.empty:
            defaults.append(p.default)
    return tuple(names), tuple(types_), tuple(defaults)


def _fill_defaults(
    func: Callable[..., typing.Any],
    params: tuple[str, ...],
    defaults: tuple[object, ...],
    arity: int,
    full: Callable[..., typing.Any],
) -> pytypes.FunctionType:
    """A def taking the first ``arity`` parameters of ``func`` and calling ``full`` with the defaults for the
    rest (as Julia expands ``f(x, y=1)`` into the methods ``f(x) = f(x, 1)`` and ``f(x, y)``: ``full`` is the
    generic function, so the call dispatches -- to a more specific method, a context's overdub, a
    redefinition)."""
    kept = list(params[:arity])
    filled = [f"__overdub_default{i}" for i in range(len(params) - arity)]
    namespace: dict[str, typing.Any] = {"__name__": func.__module__, "__overdub_full": full}
    namespace.update(zip(filled, defaults[len(defaults) - len(filled) :]))
    source = f"def method({', '.join(kept)}):\n    return __overdub_full({', '.join(kept + filled)})\n"
    exec(compile(source, f"<defaults of {func.__qualname__}>", "exec"), namespace)
    wrapper: pytypes.FunctionType = namespace["method"]
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = func.__name__, func.__qualname__, func.__doc__
    return wrapper


def methods_from(
    name: str,
    func: Callable[..., typing.Any],
    sig: tuple[object, ...] | None = None,
    full: Callable[..., typing.Any] | None = None,
    scope: Mapping[str, object] | None = None,
    converts: bool = False,
) -> list[Method]:
    """The methods a def defines: one for its full arity and, for each trailing default, one for the arity
    without it, calling ``full`` (the generic function; the def itself for a context's overdub, whose
    default-arity methods run the def they come from). ``sig`` (for all parameters) overrides the
    annotations; ``converts``: a numba signature's method (:attr:`Method.converts`)."""
    params, annotated, defaults = signature_of(func, scope, annotations=sig is None)
    if sig is not None:
        sig = tuple(as_type(t) for t in sig)
        if len(sig) != len(params):
            raise TypeError(f"{name}: signature {sig} does not match the parameters {params}")
    sig = annotated if sig is None else sig
    methods = [Method(name, func, params, sig, converts=converts)]
    for arity in range(len(params) - 1, len(params) - len(defaults) - 1, -1):
        wrapper = _fill_defaults(func, params, defaults, arity, func if full is None else full)
        methods.append(Method(name, wrapper, params[:arity], sig[:arity], origin=func, converts=converts))
    return methods


class Method:
    """One definition of a generic function (or of an overdub): a def and the signature it accepts.

    ``converts``: a method of a numba signature (``od.jit("float64(float64)", device=True)``), which -- where no
    method's signature takes a call's types -- takes the arguments numba converts to its types, as a numba-cuda
    device function does (``overdub.resolve``)."""

    __slots__ = ("name", "func", "params", "sig", "file", "line", "table", "generated", "converts")

    def __init__(
        self,
        name: str,
        func: Callable[..., typing.Any],
        params: tuple[str, ...],
        sig: Signature,
        origin: Callable[..., typing.Any] | None = None,
        converts: bool = False,
    ) -> None:
        self.name, self.func, self.params, self.sig, self.converts = name, func, params, sig, converts
        self.file, self.line = _location(origin or func)  # origin: the def a generated method comes from
        self.generated = origin is not None  # a default-arity method (its def defines it again)
        self.table: MethodTable | None = None  # set when added to one

    def __reduce__(self) -> tuple[Callable[[Owner, Signature], Method], tuple[Owner, Signature]]:
        """By reference: the method of this signature in its owner's table."""
        if self.table is None or self.table.owner is None:
            raise pickle.PicklingError(f"cannot pickle {self!r}: it belongs to no generic function or context")
        return _method_of, (self.table.owner, self.sig)

    @property
    def location(self) -> str:
        return place(self.file, self.line)

    def defined_again(self, new: Method) -> bool:
        """Is ``new`` this method's def run again unchanged (a notebook cell, ``exec``, a reload:
        :func:`overdub.reruns.same_definition`)? Then this method stays -- nothing it answered changes -- and
        says where the def was run last."""
        old_func, new_func = self.func, new.func
        if (
            self.generated
            or new.generated
            or (self.sig, self.params, self.converts) != (new.sig, new.params, new.converts)
        ):
            return False
        if not isinstance(old_func, pytypes.FunctionType) or not isinstance(new_func, pytypes.FunctionType):
            return False
        if not reruns.same_definition(old_func, new_func):
            return False
        self.file, self.line = new.file, new.line
        return True

    def applies_to(self, argtypes: Signature) -> bool:
        return len(argtypes) == len(self.sig) and all(map(issubtype, argtypes, self.sig))

    def more_specific_than(self, other: Method) -> bool:
        return len(self.sig) == len(other.sig) and self.sig != other.sig and all(map(issubtype, self.sig, other.sig))

    def signature_repr(self) -> str:
        params = ", ".join(p if t is Any else f"{p}: {type_name(t)}" for p, t in zip(self.params, self.sig))
        return f"{self.name}({params})"

    def __repr__(self) -> str:
        return f"{self.signature_repr()} at {self.location}"


class MethodMatch(world.Node):
    """A cached dispatch answer: the method a tuple of argument types reaches in one table, or why none does.

    Negative answers (no method, ambiguity) are matches too, so that a definition that changes them
    invalidates whatever relied on them (Julia's backedges from failed lookups). A call whose types no
    signature takes may reach a numba signature's method by converting its arguments
    (:attr:`Method.converts`); that choice rests on this "no method" answer, which each such method defined,
    redefined or deleted invalidates.
    """

    __slots__ = ("table", "argtypes", "method", "ambiguous")

    def __init__(
        self, table: MethodTable, argtypes: Signature, method: Method | None, ambiguous: tuple[Method, ...]
    ) -> None:
        super().__init__()
        self.table, self.argtypes, self.method, self.ambiguous = table, argtypes, method, ambiguous

    def same_answer(self, method: Method | None, ambiguous: tuple[Method, ...]) -> bool:
        return method is self.method and {id(m) for m in ambiguous} == {id(m) for m in self.ambiguous}

    def unmatched(self) -> bool:
        """No method's signature takes these types (a call may then convert its arguments to a numba
        signature's method: any such method defined, redefined or deleted can change what it reaches)."""
        return self.method is None and not self.ambiguous

    def error(self) -> MethodError | None:
        """The error a call with these argument types raises, or None when a method applies."""
        if self.method is not None:
            return None
        if self.ambiguous:
            return AmbiguityError(self.table.name, self.argtypes, self.ambiguous)
        if self.table.unarrived is not None:
            return NotArrivedError(self.table.name, self.argtypes, self.table.unarrived)
        return MethodError(self.table.name, self.argtypes, tuple(self.table.methods))

    def on_invalidate(self, cause: str) -> None:
        self.table._forget(self)

    def describe(self) -> str:
        call = _call_repr(self.table.name, self.argtypes)
        if self.method is not None:
            return f"{call} -> {self.method}"
        return f"{call} -> {'ambiguous' if self.ambiguous else 'no method'}"


class EmptyTable(world.Node):
    """The answer "this table has no methods": what a pass that skips work for tables with no methods
    consults (the operator rewrite leaves ``a + b`` to numba while every table of ``+`` is empty); the
    table's first method invalidates it."""

    __slots__ = ("table",)

    def __init__(self, table: MethodTable):
        super().__init__()
        self.table = table

    def describe(self) -> str:
        return f"{self.table.name} has no methods"


def _method_of(owner: Owner, sig: Signature) -> Method:
    table = owner.table if isinstance(owner, GenericFunction) else owner[0].table(owner[1])
    return next(m for m in table.methods if m.sig == sig)


class MethodTable:
    """The methods of one function, and the dispatch cache over them. ``owner`` names it for pickling: a
    generic function, or (context, callee) for a context's overdub table."""

    def __init__(self, name: str, owner: Owner | None = None) -> None:
        self.name = name
        self.owner = owner
        self.unarrived: str | None = None  # why the definitions another process sent for it were not adopted
        self.methods: list[Method] = []
        self._cache: dict[Signature, MethodMatch] = {}  # argument types -> the answer for them
        self._empty = EmptyTable(self)

    # -- dispatch --------------------------------------------------------------------------------------
    def resolve(self, argtypes: Signature) -> tuple[Method | None, tuple[Method, ...]]:
        """Uncached dispatch: (the most specific applicable method, ()) or (None, the ambiguous methods)."""
        applicable = [m for m in self.methods if m.applies_to(argtypes)]
        minimal = [m for m in applicable if not any(o.more_specific_than(m) for o in applicable)]
        if len(minimal) == 1:  # in a finite partial order a unique minimal element is the least one
            return minimal[0], ()
        return None, tuple(minimal)

    def dispatch(self, argtypes: Signature) -> MethodMatch:
        """The cached answer for ``argtypes``; the node being built on this thread gets an edge to it."""
        match = self._cache.get(argtypes)
        if match is None:
            with world.lock:
                match = self._cache.get(argtypes)
                if match is None:
                    match = MethodMatch(self, argtypes, *self.resolve(argtypes))
                    self._cache[argtypes] = match
        world.consult(match)
        return match

    def lookup(self, argtypes: Signature) -> Method:
        """The method ``argtypes`` dispatch to; raises MethodError or AmbiguityError."""
        match = self.dispatch(argtypes)
        if match.method is None:
            raise match.error()  # type: ignore[misc]  # error() is None only when a method applies
        return match.method

    def is_empty(self) -> bool:
        """Whether the table has no methods; while it has none, the node being built gets an edge that its
        first method invalidates."""
        if self.methods:
            return False
        world.consult(self._empty)
        return not self.methods  # a method added meanwhile has invalidated what was just consulted

    def cached(self) -> dict[Signature, MethodMatch]:
        return dict(self._cache)

    def _forget(self, match: MethodMatch) -> None:
        if self._cache.get(match.argtypes) is match:
            del self._cache[match.argtypes]

    # -- definition ------------------------------------------------------------------------------------
    def add(self, method: Method) -> Method | None:
        """Add ``method``, or replace the one with the same signature; invalidate the answers that change."""
        with world.lock:
            method.table = self
            replaced = next((i for i, m in enumerate(self.methods) if m.sig == method.sig), None)
            if replaced is not None and self.methods[replaced].defined_again(method):
                return self.methods[replaced]  # the same def run again: it stays, and nothing changes
            if replaced is None:
                self.methods.append(method)
                old, verb = None, "defined"
            else:
                old, verb = self.methods[replaced], "redefined"
                self.methods[replaced] = method
            world.bump_world()
            stale: list[world.Node] = [
                match
                for argtypes, match in self._cache.items()
                if (method.applies_to(argtypes) and not match.same_answer(*self.resolve(argtypes)))
                or (method.converts and match.unmatched())
            ]
            if len(self.methods) == 1:
                stale.append(self._empty)
            world.invalidate(stale, f"{method.signature_repr()} {verb} at {method.location}")
            return old

    def remove(self, sig: Signature, cause: str) -> Method | None:
        """Delete the method of signature ``sig`` (Julia's ``Base.delete_method``), if there is one; invalidate
        the answers that change."""
        with world.lock:
            index = next((i for i, m in enumerate(self.methods) if m.sig == sig), None)
            if index is None:
                return None
            old = self.methods.pop(index)
            world.bump_world()
            stale: list[world.Node] = [
                match
                for argtypes, match in self._cache.items()
                if (old.applies_to(argtypes) and not match.same_answer(*self.resolve(argtypes)))
                or (old.converts and match.unmatched())
            ]
            world.invalidate(stale, f"{old.signature_repr()} deleted ({cause})")
            return old


class GenericFunction:
    """A function with multiple methods, dispatched on argument types on the host and inside kernels."""

    def __init__(self, name: str, module: str | None = None, qualname: str | None = None):
        self.__name__ = name
        self.__qualname__ = qualname or name
        # None for one made without a module (as for a function's); typeshed has object.__module__ a str
        self.__module__ = module  # type: ignore[assignment]
        self.__doc__ = None
        self.table = MethodTable(name, owner=self)
        # host calls: argument classes -> (the method's def, the dispatch answer, a check of the values or None)
        self._host_calls: dict[tuple[type, ...], tuple[Callable[..., typing.Any], MethodMatch, ArgsCheck | None]] = {}
        _every_generic_function.add(self)

    def __reduce__(self) -> tuple[object, ...]:
        """By reference, or -- once :mod:`overdub.travel` is imported -- with the definitions of this process,
        which another process adopts (its :data:`reduce_generic`)."""
        if reduce_generic is not None:
            return reduce_generic(self)
        return reference_to(self, self.__module__, self.__qualname__)

    def define(
        self, func: Callable[..., typing.Any], sig: tuple[object, ...] | None = None, converts: bool = False
    ) -> Method:
        """Add the methods of ``func`` (its annotations give the signature unless ``sig`` is given; each
        trailing default adds a method of lower arity; ``converts``: of a numba signature); returns the
        full-arity one."""
        methods = methods_from(self.__name__, func, sig, full=self, converts=converts)
        kept = self._defined_again(methods[0])
        if kept is not None:
            return kept
        for method in methods:
            self.table.add(method)
        if func.__doc__ and not self.__doc__:
            self.__doc__ = func.__doc__
        return methods[0]

    def _defined_again(self, method: Method) -> Method | None:
        """The method of ``method``'s signature where ``method`` is its def run again unchanged: it stays,
        with the methods its defaults made (:meth:`MethodTable.defined_again`). Else None."""
        with world.lock:
            old = next((m for m in self.table.methods if m.sig == method.sig), None)
            return old if old is not None and old.defined_again(method) else None

    @property
    def methods(self) -> list[Method]:
        return list(self.table.methods)

    def __call__(self, *args: object) -> typing.Any:  # what the method reached returns
        """Call on the host: for classes of arguments seen before, one dict lookup, the answer's validity flag
        (a redefinition clears it) and the values' checks where the classes do not decide the types."""
        n = len(args)
        entry = self._host_calls.get(
            (type(args[0]), type(args[1])) if n == 2 else (type(args[0]),) if n == 1 else tuple(map(type, args))
        )
        if entry is not None:
            func, match, check = entry
            if match.valid and (check is None or check(args)):
                return func(*args)
        return self._call_typed(args)

    # -- numba-cuda's device dispatcher's inspection (od.jit(device=True) functions are generic functions) ----
    def compile_device(self, signature: Sequence[object]) -> typing.Any:
        """The method a call of ``signature`` (argument types) reaches, compiled on its own for the CUDA target:
        numba-cuda's compile result (its ``fndesc.mangled_name`` names it in :meth:`inspect_asm`'s PTX)."""
        return _inspected(self, signature, "result")

    def inspect_llvm(self, signature: Sequence[object]) -> str:
        """The NVVM IR of :meth:`compile_device`'s compile."""
        return str(_inspected(self, signature, "llvm"))

    def inspect_asm(self, signature: Sequence[object], cc: Sequence[int | str] | None = None) -> str:
        """The PTX of :meth:`compile_device`'s compile, for compute capability ``cc``."""
        return str(_inspected(self, signature, "ptx", cc))

    def inspect_sass(self, signature: Sequence[object]) -> str:
        """numba-cuda's RuntimeError: a device function has no SASS of its own (inspect the kernel's)."""
        return str(_inspected(self, signature, "sass"))

    def __getitem__(self, config: object) -> typing.NoReturn:
        """``f[blocks, threads]``: a generic function is called from kernels, not launched as one (numba-cuda's
        error and the start of its message, for its device functions)."""
        raise RuntimeError(
            f"Cannot compile a device function as a kernel: {self.__qualname__} is a generic function, called "
            f"from kernels; launch a kernel that calls it"
        )

    def _call_typed(self, args: tuple[object, ...]) -> typing.Any:
        argtypes = tuple(typeof(a) for a in args)
        match = self.table.dispatch(argtypes)
        if match.method is None:
            raise match.error()  # type: ignore[misc]  # error() is None only when a method applies
        check = _values_check(args, argtypes)
        if check is not False:
            self._host_calls[tuple(map(type, args))] = (match.method.func, match, check)
        return match.method.func(*args)

    def __repr__(self) -> str:
        n = len(self.table.methods)
        return f"<generic function {self.__qualname__} with {n} method{'s' if n != 1 else ''}>"


# Every generic function alive, for what ships this process's definitions to others (overdub.travel, which
# also sets reduce_generic: how a generic function pickles with them).
_every_generic_function: weakref.WeakSet[GenericFunction] = weakref.WeakSet()
runtime.register_cache(f"{__name__}._every_generic_function", _every_generic_function, kept="definitions, not a cache")
reduce_generic: Callable[[GenericFunction], tuple[object, ...]] | None = None


def every_generic_function() -> list[GenericFunction]:
    """The generic functions alive in this process, in no particular order."""
    return list(_every_generic_function)


def _values_check(args: tuple[object, ...], argtypes: tuple[ConcreteType, ...]) -> ArgsCheck | Literal[False] | None:
    """One check that other arguments of the same classes have the types ``argtypes`` (see
    :func:`overdub.types.same_type_check`): None when the classes decide, False when no cheap check exists."""
    found = [(i, same_type_check(a, t)) for i, (a, t) in enumerate(zip(args, argtypes))]
    if any(check is False for _, check in found):
        return False
    checks: list[tuple[int, ValueCheck]] = [
        (i, check) for i, check in found if check is not None and check is not False
    ]
    if not checks:
        return None
    if all(check is fits_int64 for _, check in checks):  # ints alone: their range compared inline, no calls
        return _ints_fit_int64(tuple(index for index, _ in checks))
    if len(checks) == 1:
        [(index, check)] = checks
        return lambda values: check(values[index])

    def check_all(values: tuple[object, ...]) -> bool:
        for index, check in checks:
            if not check(values[index]):
                return False
        return True

    return check_all


def _ints_fit_int64(indices: tuple[int, ...]) -> ArgsCheck:
    """That the ints at ``indices`` are within int64's range (the commonest check: one or two int arguments)."""
    low, high = -(2**63), 2**63 - 1
    if len(indices) == 1:
        (i,) = indices
        return lambda values: low <= values[i] <= high  # type: ignore[operator]
    if len(indices) == 2:
        i, j = indices
        return lambda values: low <= values[i] <= high and low <= values[j] <= high  # type: ignore[operator]
    return lambda values: all(low <= values[k] <= high for k in indices)  # type: ignore[operator]


# a generic function's own code, compiled on its own for a target (overdub.reflect sets it: it compiles)
inspect_device: Callable[[GenericFunction, tuple[object, ...], str, typing.Any], typing.Any] | None = None


def _inspected(gf: GenericFunction, signature: Sequence[object], kind: str, cc: typing.Any = None) -> typing.Any:
    if inspect_device is None:
        raise RuntimeError("overdub.reflect is not imported: import overdub")
    return inspect_device(gf, tuple(signature), kind, cc)


def function(
    func: Callable[..., typing.Any],
    sig: tuple[object, ...] | None = None,
    *,
    scope: Mapping[str, object] | None = None,
    converts: bool = False,
) -> GenericFunction:
    """Decorator: add ``func`` as a method of the generic function its name is bound to where the ``def``
    runs, and return that generic function.

    As in Julia, a name is a binding: if the name of the ``def`` already means a generic function in the
    scope it is defined in -- the module (re-running a cell or a module's source), the enclosing function's
    locals (a factory's earlier def), or what ``from lib import area`` bound -- the def adds a method to it,
    replacing the method with the same signature. Otherwise it starts a new generic function: two closures
    made by two calls of a factory, or defs exec'd into two namespaces, are separate functions.

    ``sig`` gives the method's signature instead of its annotations; ``scope`` the namespace the def runs in
    (for wrappers of this decorator; by default the caller's); ``converts``: ``sig`` is a numba signature
    (:attr:`Method.converts`).
    """
    if not isinstance(func, pytypes.FunctionType):
        raise TypeError(
            f"@od.function takes a def, not {_what(func)}: a generic function's methods are Python "
            f"functions the compiler can read"
        )
    scope = sys._getframe(1).f_locals if scope is None else scope
    with world.lock:
        gf = scope.get(func.__name__) if func.__name__ != "<lambda>" else None
        if not isinstance(gf, GenericFunction) and "<" not in func.__qualname__:
            gf = func.__globals__.get(func.__name__)  # a def at a module's top level, through a wrapper
        if not isinstance(gf, GenericFunction):
            gf = GenericFunction(func.__name__, func.__module__, func.__qualname__)
        gf.define(func, sig, converts)
    return gf


def _what(value: object) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    return f"{type(value).__name__} {getattr(value, '__qualname__', value)!r}"


def which(f: GenericFunction, *argtypes: object) -> Method:
    """The method a call of ``f`` with these argument types reaches (raises MethodError/AmbiguityError)."""
    return f.table.lookup(tuple(as_type(t) for t in argtypes))


def methods(f: GenericFunction) -> list[Method]:
    """The methods of ``f``, each with its signature and where it was defined (``m.location``)."""
    return f.methods
