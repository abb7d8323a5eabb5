"""Facts: each thing a compile consulted, as a record another process re-checks.

A fact is a record of locators (:mod:`overdub.locators`) and digests (:mod:`overdub.digests`) -- plain data:
it is pickled into a disk cache entry and read by another process -- and it checks itself *through the calls
a compile makes* (a dispatch, a read of a global, a read of a function's code), so the node being built gets
the edge a fresh compile would give it. ``functions`` maps the locator of each function checked so far to
that function, where a global's fact finds the namespace it was read from.
"""

from __future__ import annotations

import dataclasses
import sys
import types as pytypes
import typing
from typing import TYPE_CHECKING, Any

from . import bindings, world
from .digests import answer_digest, function_digest, signature_digest, struct_digest, value_digest
from .embedded import embedded_digest
from .libraries import SHIPPED
from .locators import Locator, find_function, find_namespace, find_table, resolve_imported
from .registry import Signature

if TYPE_CHECKING:
    from .job import CompileJob

__all__ = ["Fact", "DispatchFact", "EmptyTableFact", "StructFact", "FunctionFact", "GlobalFact", "EmbeddedFact"]


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
        match = find_table(self.table, job).dispatch(self.argtypes)
        return None if answer_digest(match) == self.answer else f"{match.describe()} is a new answer"

    def describe(self) -> str:
        return f"the dispatch of ({signature_digest(self.argtypes)}) in {self.table!r:.80}"


@dataclasses.dataclass(frozen=True, slots=True)
class EmptyTableFact(Fact):
    """The method table ``table`` (a locator) had no method."""

    table: Locator

    def check(self, job: CompileJob, functions: dict[Locator, pytypes.FunctionType]) -> str | None:
        table = find_table(self.table, job)
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
        same = cls.__overdub_definition__.valid and struct_digest(cls.__overdub_type__) == self.digest
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
        func = functions[self.function] = find_function(self.function, job)
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
            value = bindings.read(find_namespace(self.namespace, functions), self.name, self.with_builtins)
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
