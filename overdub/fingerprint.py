"""Fingerprints: what a compile consulted, written down so that another process can check it still holds.

A compiled kernel's edges are nodes of this process -- a dispatch answer, a global's binding, a function's
code. For the disk cache (:mod:`overdub.diskcache`) each becomes a *fact* (:mod:`overdub.facts`) another
process can re-check: how to find the thing again there (a *locator*, :mod:`overdub.locators`: a module and a
qualified name, a generic function's table and a signature, the kernel itself) and a *content digest* of
what it was (:mod:`overdub.digests`; code numba compiles itself with all it embeds, :mod:`overdub.embedded`).
:func:`record` writes the facts of a compiled kernel -- dispatch answers, then code, then globals;
:func:`replay` re-checks them in this process *through the same calls a compile makes* (a dispatch, a read of
a global, a read of a function's code), so the node being built gets exactly the edges a fresh compile would
have given it, and in-process invalidation works the same after a load. :func:`context_digest` is what the
cache key holds of each context of the chain.

What has no locator or no content digest -- a closure cell, an object of the user's own class, a function
that cannot be found by name -- raises :class:`~overdub.digests.Uncacheable`: the kernel is then compiled and
not stored, never loaded on trust.
"""

from __future__ import annotations

import pickle
import types as pytypes
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from . import bridge, world
from .bindings import Binding, CellBinding, FunctionState, Guarded
from .context import Context, ContextShape
from .digests import (
    Uncacheable,
    answer_digest,
    function_digest,
    parts_digest,
    signature_digest,
    struct_digest,
    type_digest,
    value_digest,
)
from .embedded import embedded_digest, embeds_numba_code, target_digest
from .facts import DispatchFact, EmbeddedFact, EmptyTableFact, Fact, FunctionFact, GlobalFact, StructFact
from .hooktables import POSTHOOK, PREHOOK
from .libraries import is_library_module, is_versioned_module
from .locators import Locator, context_ref, function_ref, namespace_ref, object_ref, table_ref
from .registry import EmptyTable, MethodMatch, Signature
from .roots import TargetRoot

if TYPE_CHECKING:
    from .compiler import Kernel
    from .job import CompileJob

__all__ = ["record", "replay", "context_digest"]


def context_digest(ctx: Context) -> str:
    """A context of a chain: where it is found, and its forwards and replacements (its parent is the next
    context of the chain; its overdub tables are facts). A target's root is what overdub's code makes it."""
    if isinstance(ctx, TargetRoot):
        return f"root:{ctx.name}:{type_digest(ctx.state)}"
    if ctx.observes(PREHOOK) or ctx.observes(POSTHOOK):
        raise Uncacheable(f"{ctx!r} has hooks")
    forwards, replacements = ctx.contents()
    items = sorted(f"{value_digest(callee)}->{target_digest(to)}" for callee, to in forwards)
    items += sorted(f"{value_digest(obj)}=>{target_digest(new)}" for obj, new in replacements)
    return parts_digest(type(ctx).__qualname__, context_ref(ctx), items)


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
            table = table_ref(node.table)
            facts.append(DispatchFact(table, _portable_types(node.argtypes), answer_digest(node)))
            for method in [node.method] if node.method is not None else []:
                methods.setdefault(id(method.func), ("method", table, signature_digest(method.sig)))
        elif isinstance(node, EmptyTable):
            facts.append(EmptyTableFact(table_ref(node.table)))
    for node in leaves:
        if isinstance(node, FunctionState):
            func = node.function()
            if func is None:
                raise Uncacheable("a function it compiled no longer exists")
            ref = function_ref(func, job, methods)
            facts.append(FunctionFact(ref, function_digest(func)))
            namespaces.setdefault(id(func.__globals__), ref)
            compiled.add(func)
    typed_by: set[tuple[str, str]] = set()  # the typing code (overloads, intrinsics) the facts digest
    for node in leaves:
        if isinstance(node, Binding):
            _check_compiled(node.value, compiled)
            namespace = namespace_ref(node.namespace, namespaces)
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
            facts.append(StructFact(object_ref(node.cls), struct_digest(struct_type)))
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
