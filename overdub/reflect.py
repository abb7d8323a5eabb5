"""Introspection: what a kernel depends on, why things recompiled, and the code it became."""

from __future__ import annotations

import html
import types as pytypes
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast

from . import compiler, registry, world
from .call import KernelCall
from .context import Context
from .registry import EmptyTable, GenericFunction, MethodMatch
from .rewrite import rewrite
from .runtime import runtime
from .targets import CompileOptions, get_target
from .targets.registry import DEVICE, HOST

__all__ = [
    "explain",
    "Explanation",
    "invalidation_tree",
    "InvalidationTree",
    "stats",
    "code_ptx",
    "code_llvm",
    "code_sass",
    "code_typed",
    "code_lto_ptx",
]

stats: Callable[[], dict[str, int]] = compiler.stats


class Explanation(list[str]):
    """What a compiled kernel consulted, as :func:`explain` gives it: a list of its edges' texts (so ``in``,
    ``len`` and iteration work as on a list), grouped when printed -- as text, or as a table in Jupyter."""

    def __init__(self, groups: dict[str, list[str]], negative: bool) -> None:
        super().__init__(text for texts in groups.values() for text in texts)
        self.groups, self.negative = groups, negative

    def __str__(self) -> str:
        if not self.groups:
            return "no compiled kernel for these arguments"
        lines = []
        for group, texts in self.groups.items():
            lines.append(f"{group} ({len(texts)}):")
            lines += [f"  {text}" for text in texts]
        if not self.negative:
            lines.append("(negative facts -- 'no method', 'has no methods' -- left out: explain(..., negative=True))")
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text display
        printer.text(str(self))

    def _repr_html_(self) -> str:  # Jupyter's rich display
        rows = "".join(
            f"<tr><th colspan='1' style='text-align:left'>{html.escape(group)} ({len(texts)})</th></tr>"
            + "".join(f"<tr><td style='text-align:left'><code>{html.escape(t)}</code></td></tr>" for t in texts)
            for group, texts in self.groups.items()
        )
        return f"<table>{rows}</table>"


class InvalidationTree(list[world.Invalidation]):
    """The invalidation log as trees (``od.invalidation_tree()``; SnoopCompile's ``invalidation_trees``): per
    definition that changed something, what it invalidated -- the dispatch answers or globals it changed, the
    compiled callees and kernels built on them, each under what reached it -- and what each kernel's recompile
    cost, once it was recompiled."""

    def __str__(self) -> str:
        if not self:
            return "no invalidations"
        return "\n\n".join(_tree(entry) for entry in self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text display
        printer.text(str(self))

    def _repr_html_(self) -> str:  # Jupyter's rich display
        return f"<pre>{html.escape(str(self))}</pre>"


def _tree(entry: world.Invalidation) -> str:
    children: dict[int, list[int]] = {}
    for index, parent in enumerate(entry.parents or (-1,) * len(entry.invalidated)):
        children.setdefault(parent, []).append(index)
    lines = [f"{entry.cause} (world {entry.world})"]

    def walk(index: int, prefix: str, last: bool) -> None:
        text = entry.invalidated[index]
        # the compile that followed this invalidation (not an earlier one, not a later one's)
        after = [ms for at, ms in compiler.compile_ms.get(text, ()) if at >= entry.world]
        recompiled = f" -> recompiled in {after[0]:.1f} ms" if after else ""
        lines.append(f"{prefix}{'└─ ' if last else '├─ '}{text}  [worlds {entry.worlds[index]}]{recompiled}")
        below = children.get(index, [])
        for i, child in enumerate(below):
            walk(child, prefix + ("   " if last else "│  "), i == len(below) - 1)

    roots = children.get(-1, [])
    for i, root in enumerate(roots):
        walk(root, "", i == len(roots) - 1)
    return "\n".join(lines)


def invalidation_tree(everything: bool = False) -> InvalidationTree:
    """The recent invalidations (``od.invalidation_log()``) that made something built on them stale, each
    printed as the tree of what it made stale, with each kernel's recompile cost in ms once it recompiled.
    ``everything=True`` keeps the changes nothing depended on (a first method, a target's own setup)."""
    entries = world.invalidation_log(internal=True)
    if not everything:
        entries = [entry for entry in entries if any(parent != -1 for parent in entry.parents)]
    return InvalidationTree(entries)


def _group(node: object) -> str | None:
    """The group an edge is shown in, or None for a negative fact (a dispatch that found no method, a table
    with none)."""
    if isinstance(node, MethodMatch):
        if node.method is None:
            return None
        owner = node.table.owner
        if isinstance(owner, GenericFunction):
            return "methods of generic functions"
        return "overdubs of contexts" if isinstance(owner, tuple) and isinstance(owner[0], Context) else "methods"
    if isinstance(node, EmptyTable):
        return None
    return {
        "Binding": "globals",
        "CellBinding": "captured variables",
        "FunctionState": "code of functions",
        "ArrayContents": "contents of arrays",
        "ContextShape": "contexts",
        "MethodInstance": "compiled callees",
        "StructDefinition": "structs",
    }.get(type(node).__name__, "other")


def explain(
    kernel: object,
    *args: object,
    target: str | None = None,
    context: Context | None = None,
    state: object = None,
    negative: bool = False,
) -> Explanation:
    """What the cached kernel for these arguments (or argument types) consulted: every dispatch answer, overdub,
    compiled callee, global, captured variable and struct its validity depends on, each with the world range
    it is valid for, grouped by kind. ``negative=True`` adds the negative facts (a dispatch that found no
    method, a table with none: edges too, which a new method invalidates). Empty when no such kernel is
    cached."""
    groups: dict[str, list[str]] = {}
    for node, text in compiler.explain(KernelCall.of(kernel, args, target, context, state, typed=True).job):
        group = _group(node)
        if group is None and not negative:
            continue
        groups.setdefault(group or "negative facts", []).append(text)
    return Explanation(groups, negative)


def _code(
    kind: str,
    kernel: object,
    args: tuple[object, ...],
    target: str,
    cc: Sequence[int | str] | None,
    device: int | None,
    context: Context | None,
    state: object,
    options: dict[str, object],
) -> str:
    """``kernel``'s code of ``kind`` on ``target``, compiled -- if it is not yet -- to be read, not launched:
    for compute capability ``cc``, else for ``device``'s, else for the current device's (sm_90 with no GPU),
    with these compile options."""
    arch = None if cc is None else tuple(cc)
    reading = get_target(target).for_reflection(arch, device).configured(CompileOptions.of(**options))
    with reading.reflecting():
        compiled = KernelCall.of(kernel, args, reading, context, state, typed=True).compiled()
    return reading.code(compiled.code, kind)


def code_ptx(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int | str] | None = None,
    device: int | None = None,
    context: Context | None = None,
    state: object = None,
    target: str = DEVICE,
    **options: object,
) -> str:
    """The PTX of ``kernel`` for these arguments or numba types, for compute capability ``cc``, compiled with
    these compile options (``fastmath=True``, ``max_registers=32``, ...: :class:`CompileOptions`). Needs no GPU.
    In a context with state, ``state`` is the state's value or numba type (the kernel's first parameter)."""
    return _code("ptx", kernel, args_or_types, target, cc, device, context, state, options)


def code_llvm(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int | str] | None = None,
    device: int | None = None,
    context: Context | None = None,
    state: object = None,
    target: str = DEVICE,
    **options: object,
) -> str:
    """The optimised LLVM IR of ``kernel``: NVVM IR on the CUDA target (needs no GPU); with ``target="cpu"``,
    the CPU target's code for the kernel's body (what runs for each thread). Arguments as ``od.cuda`` takes
    them (host arrays too) or numba types."""
    return _code("llvm", kernel, args_or_types, target, cc, device, context, state, options)


def code_native(
    kernel: object, *args_or_types: object, context: Context | None = None, state: object = None, **options: object
) -> str:
    """The CPU target's machine code (assembly) for ``kernel``'s body; ``od.code_sass`` is the GPU's."""
    return _code("asm", kernel, args_or_types, HOST, None, None, context, state, options)


def code_sass(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int | str] | None = None,
    device: int | None = None,
    context: Context | None = None,
    state: object = None,
    target: str = DEVICE,
    **options: object,
) -> str:
    """The SASS of ``kernel`` (needs a GPU, or ptxas and nvdisasm; ``cc`` defaults to the device's)."""
    return _code("sass", kernel, args_or_types, target, cc, device, context, state, options)


def code_typed(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int | str] | None = None,
    device: int | None = None,
    context: Context | None = None,
    state: object = None,
    target: str = DEVICE,
    **options: object,
) -> str:
    """The typed numba IR of ``kernel`` on the CUDA target, annotated on its source lines (numba's
    ``inspect_types``; Julia's ``@code_typed``): the type of every variable after dispatch. Needs no GPU."""
    return _code("typed", kernel, args_or_types, target, cc, device, context, state, options)


def code_lto_ptx(
    kernel: object,
    *args_or_types: object,
    cc: Sequence[int | str] | None = None,
    device: int | None = None,
    context: Context | None = None,
    state: object = None,
    target: str = DEVICE,
    **options: object,
) -> str:
    """The PTX of ``kernel`` compiled with ``lto=True`` after link-time optimisation with everything it links
    (numba-cuda's ``inspect_lto_ptx``; needs nvJitLink)."""
    return _code("lto_ptx", kernel, args_or_types, target, cc, device, context, state, dict(options, lto=True))


# --- a device function's own code, as numba-cuda's device dispatcher shows it -----------------------------

# a method's def -> {(argument types, the target's cache tag): (the world it was compiled in, what the target
# compiled)}: one compile per world (compile_device's name is the one inspect_asm shows), none stale (a
# redefinition anywhere moves the world)
_device_functions: weakref.WeakKeyDictionary[object, dict[tuple[object, ...], tuple[int, object]]]
_device_functions = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._device_functions", _device_functions)


def device_function(
    gf: GenericFunction, argtypes: Sequence[Any], cc: Sequence[int | str] | None = None, target: str = DEVICE
) -> tuple[Any, Any]:
    """The method of ``gf`` a call of ``argtypes`` reaches, compiled on its own as a device function for
    ``target`` (compute capability ``cc``): (the target, what it compiled) -- numba-cuda's ``compile_device``."""
    reading = get_target(target).for_reflection(None if cc is None else tuple(cc), None)
    types = tuple(argtypes)
    match = gf.table.dispatch(types)
    if match.method is None:
        raise match.error()  # type: ignore[misc]  # error() is None only when a method applies
    func = cast(pytypes.FunctionType, match.method.func)
    compiled = _device_functions.setdefault(func, {})
    key, now = (types, reading.cache_tag), world.current_world()
    if key not in compiled or compiled[key][0] != now:
        with reading.reflecting():
            made = reading.compile_device_function(rewrite(func, reading.base.chain(reading, None)), types)
        compiled[key] = (now, made)
    return reading, compiled[key][1]


def device_code(gf: GenericFunction, argtypes: tuple[object, ...], kind: str, cc: Sequence[int | str] | None) -> Any:
    """The code of kind ``kind`` ("llvm", "ptx", "sass") of :func:`device_function`'s compile, or ("result") the
    compile result itself: the generic function's ``inspect_*`` and ``compile_device``."""
    reading, compiled = device_function(gf, argtypes, cc)
    if kind == "result":
        return getattr(compiled, "cres", compiled)
    return str(reading.device_code(compiled, kind))


registry.inspect_device = device_code
