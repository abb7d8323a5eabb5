"""The typing bridge proper: how calls in compiled code are typed through numba.

* :func:`register_opaque`, through which dispatch during typing (:mod:`overdub.resolve`) gives each
  :class:`~overdub.rewrite.Overdubbed` callee the numba type whose typing is where dispatch happens;
* :func:`delegate` and :func:`dispatcher_call`, which type calls numba itself knows, and what numba's own
  registrations say of a callee (:func:`numba_implements`, :func:`always_inlined_overload`); a call typed by
  templates of the user's code leaves the need :class:`TypedByTemplates` on the node being built;
* :func:`call_sites`, the source lines of the calls being typed, for messages;
* :func:`compile_error_message` and :func:`numba_error_class`: which failures are numba's own.
"""

from __future__ import annotations

import inspect
import sys
import types as pytypes
from collections.abc import Callable
from inspect import signature as pysignature  # what numba.core.utils.pysignature is
from typing import TYPE_CHECKING, Any, NamedTuple

import numba
from numba.core import types
from numba.core.errors import TypingError as TypingError  # (the bridge re-exports numba's)
from numba.core.extending import models, register_model, typeof_impl
from numba.core.imputils import lower_constant
from numba.core.typing.templates import fold_arguments

from .. import world
from ..runtime import runtime
from ..types import keep_as_is

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher
    from numba.core.typing.context import BaseContext as TypingContext
    from numba.core.typing.templates import Signature


# numba's typing context class -> its target as messages name it ("CPU", "CUDA"): each target names its own
_target_names: dict[type, str] = {}
runtime.register_cache(f"{__name__}._target_names", _target_names, kept="what each target registered when imported")


def name_typing_context(context_class: type, name: str) -> None:
    """Messages about code numba's typing context ``context_class`` types say it is for the ``name`` target."""
    _target_names[context_class] = name


def unliteral(t: types.Type) -> types.Type:
    unliteral_type: types.Type = types.unliteral(t)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return unliteral_type


def register_opaque(
    python_class: type, numba_type: type[types.Type], type_of: Callable[[Any], types.Type] | None = None
) -> None:
    """Let each value of ``python_class`` appear in compiled code as a compile-time constant of the numba type
    ``numba_type(value)`` (or ``type_of(value)``, one of ``numba_type``; its data is never read: dispatch and
    attribute typing use the type alone)."""
    typeof_impl.register(python_class)(lambda value, c: (type_of or numba_type)(value))
    register_model(numba_type)(models.OpaqueModel)
    lower_constant(numba_type)(lambda context, builder, ty, pyval: context.get_dummy_value())  # type: ignore[no-untyped-call]  # numba's is unannotated


# --- calls numba types ----------------------------------------------------------------------------------


def fold_call(
    pyfunc: Callable[..., object], argtypes: tuple[types.Type, ...], kws: dict[str, types.Type]
) -> tuple[tuple[types.Type, ...], inspect.Signature]:
    """Positional argument types for a call of ``pyfunc`` with keywords and defaults resolved (numba's
    ``Omitted`` for a default), and the Python signature lowering folds the call's arguments with."""
    pysig = pysignature(pyfunc)
    folded = fold_arguments(  # type: ignore[no-untyped-call]  # numba's is unannotated
        pysig,
        argtypes,
        kws,
        lambda index, param, value: value,
        lambda index, param, default: types.Omitted(default),  # type: ignore[no-untyped-call]  # numba's is unannotated
        lambda index, param, values: types.StarArgTuple(tuple(values)),  # type: ignore[no-untyped-call]  # numba's is unannotated
    )
    return tuple(folded), pysig


def delegate(
    context: TypingContext, callee: object, args: tuple[types.Type, ...], kws: dict[str, types.Type]
) -> tuple[Signature, object] | tuple[None, None]:
    """Type a call of something numba itself knows (a builtin, a numba intrinsic): (signature, impl key).

    Keyword arguments of a Python placeholder (``carray(ptr, shape, dtype=...)``) are folded into positions
    first, its defaults passed as numba's ``Omitted``, and the signature carries the placeholder's Python
    signature, with which lowering folds the call's own keyword arguments the same way. A placeholder whose
    parameters do not take the call (an ``@overload``'s stub ``def f(): pass``) leaves the keywords to
    numba's templates, which fold them with the overload's own signature."""
    pysig = None
    if kws and isinstance(callee, pytypes.FunctionType) and _binds(callee, args, kws):
        args, pysig = fold_call(callee, args, kws)
        kws = {}
    fnty = callee_type(context, callee, args)
    sig: Signature | None = context.resolve_function_type(fnty, args, kws)  # type: ignore[no-untyped-call]  # numba's is unannotated
    if sig is None:
        return None, None
    _note_typing_modules(fnty)
    impl_key = fnty.get_impl_key(sig)
    return (sig if pysig is None else sig.replace(pysig=pysig)), impl_key  # type: ignore[no-untyped-call]  # numba's is unannotated


def _binds(pyfunc: Callable[..., object], args: tuple[types.Type, ...], kws: dict[str, types.Type]) -> bool:
    """Do ``pyfunc``'s parameters take a call with these arguments?"""
    try:
        pysignature(pyfunc).bind(*args, **kws)
    except TypeError:
        return False
    return True


def callee_type(context: TypingContext, callee: object, args: tuple[types.Type, ...]) -> types.Callable:
    """numba's type of ``callee``; where numba has none (a builtin it does not implement on this target), a
    TypingError naming the function, the argument types and the kernel's line, instead of numba's bare
    "Cannot determine Numba type of <class 'builtin_function_or_method'>"."""
    try:
        fnty: types.Callable = context.resolve_value_type(callee)  # type: ignore[no-untyped-call]  # numba's is unannotated
        return fnty
    except ValueError:
        module = getattr(callee, "__module__", None)
        name = f"{module + '.' if module else ''}{getattr(callee, '__qualname__', None) or repr(callee)}"
        target = _target_names.get(type(context), type(context).__name__)
        sites = call_sites()
        where = f" (at {sites[0]})" if sites else ""
        raise numba.core.errors.TypingError(
            f"{name}({', '.join(str(arg) for arg in args)}) cannot be compiled for the {target} target: numba "
            f"has no implementation of {name}{where}"
        ) from None


class TypedByTemplates(NamedTuple):
    """A need of compiled code: a call or attribute read in it was typed by the numba typing template (or the
    ``@overload``'s function behind it) ``module``.``qualname``, outside numba and overdub: the disk cache
    stores the code only where a fact digests that very code."""

    module: str
    qualname: str


def _note_typing_modules(fnty: types.Type) -> None:
    """Record on the node being built (in its ``needs``, which its callers inherit) each module outside numba
    and overdub whose typing templates may have typed this call -- an ``@overload`` written in the user's
    code, say: the disk cache, which cannot check such code, then does not store what was built. (numba
    internals: a template's ``_overload_func`` and ``_definition_func``.)"""
    needs = getattr(world.being_built(), "needs", None)
    if needs is not None:
        for template in getattr(fnty, "templates", ()):
            _note_template(needs, template)


def _note_template(needs: set[object], template: object) -> None:
    for source in (template, getattr(template, "_overload_func", None), getattr(template, "_definition_func", None)):
        module = getattr(source, "__module__", None)
        if isinstance(module, str) and not module.startswith(("numba", "overdub")):
            needs.add(TypedByTemplates(module, getattr(source, "__qualname__", repr(source))))


def note_attribute_templates(compiled: Any) -> None:  # a numba compile result, or a dispatcher
    """As :func:`_note_typing_modules` for calls, for each attribute read in ``compiled`` (a numba compile
    result, or a dispatcher: each of its compile results) that typing templates outside numba and overdub
    resolved: an ``@overload_method``, an ``@overload_attribute``, an ``AttributeTemplate``. numba types such
    a read (``x.method(...)``, ``x.attribute``) itself, never through overdub's dispatch. (numba internals: a
    compile result's typed IR, the typing context's ``find_matching_getattr_template``.)"""
    needs = getattr(world.being_built(), "needs", None)
    if needs is None:
        return
    results = compiled.overloads.values() if hasattr(compiled, "overloads") else [compiled]
    for cres in list(results):
        annotation, context = getattr(cres, "type_annotation", None), cres.typing_context
        if annotation is None:
            continue
        for block in annotation.blocks.values():
            for expr in block.find_exprs("getattr"):
                typ = annotation.typemap.get(expr.value.name)
                if typ is None or isinstance(typ, types.Module):  # numba's own module templates (user
                    continue  # modules are overdub's proxies, typed through the bridge)
                try:  # asked again outside the compile: where numba cannot say, not stored
                    found = context.find_matching_getattr_template(typ, expr.attr) or (
                        context.find_matching_getattr_template(unliteral(typ), expr.attr)
                    )
                except Exception:  # whatever resolving it raises here
                    needs.add(TypedByTemplates(type(typ).__module__, f"{type(typ).__qualname__}.{expr.attr}"))
                    continue
                if found:
                    _note_template(needs, found["template"])


def always_inlined_overload(
    context: TypingContext, callee: object, args: tuple[types.Type, ...], kws: dict[str, types.Type]
) -> pytypes.FunctionType | None:
    """The Python implementation an ``@overload(callee, inline="always")`` gives for these argument types, or
    None. numba inlines such calls in its IR before lowering, which a call typed through overdub's dispatch
    never reaches; overdub compiles the implementation as a callee instead. (numba internals: the template's
    ``_inline`` and ``_overload_func``.)"""
    fnty = callee_type(context, callee, args)
    for template in getattr(fnty, "templates", ()):
        inline = getattr(template, "_inline", None)
        if inline is not None and inline.is_always_inline and hasattr(template, "_overload_func"):
            impl = template._overload_func(*args, **kws)
            if isinstance(impl, pytypes.FunctionType):
                return impl
    return None


def numba_implements(context: TypingContext, callee: object) -> bool:
    """Does numba's typing have its own registration for ``callee`` (``@overload``, ``@intrinsic``, a typing
    template)? Then a Python body it may have is a placeholder. (numba internals: the typing context's
    registry of globals.)"""
    return context._lookup_global(callee) is not None  # type: ignore[no-untyped-call]  # numba's is unannotated


def typing_code(value: object) -> list[tuple[object, pytypes.FunctionType | None]]:
    """What numba's registrations of ``value`` (for the CPU target, and the CUDA target where numba-cuda is
    imported) run when they type and lower a call of it, for the disk cache to digest: each template with the
    Python function behind it -- an ``@overload``'s or ``@intrinsic``'s definition -- or None where the
    template's meaning is its class's own code (a typing template with separate lowering).

    Read off the registries themselves, not a typing context's installed view: refreshing a context imports
    all of numba's own declarations, which a warm start that compiles nothing never needs (0.5 s of its 0.8).
    The registries read are those every registration outside numba lands in -- numba's and numba-cuda's
    builtin registries (``@overload``, ``@intrinsic``, ``infer_global``) and any a program installed in a typing
    context -- so the answer differs from the installed view only by numba's own declarations, which the
    digest leaves to numba's version. (numba internals: ``Registry.globals``, ``BaseContext._registries``, a
    template's ``_overload_func`` and ``_definition_func``.)"""
    found: list[tuple[object, pytypes.FunctionType | None]] = []
    for registry in _global_registries():
        for registered, ty in list(registry.globals):
            if registered is not value:
                continue
            for template in getattr(ty, "templates", ()):
                source = getattr(template, "_overload_func", None) or getattr(template, "_definition_func", None)
                found.append((template, source if isinstance(source, pytypes.FunctionType) else None))
    return found


keep_as_is(numba.literal_unroll)  # numba's unrolling pass finds its loops by this very function

# each target's typing registries of globals, as a function giving them (numba-cuda's, from the CUDA target)
_target_registries: list[Callable[[], list[Any]]] = []
runtime.register_cache(
    f"{__name__}._target_registries", _target_registries, kept="what the targets registered when imported"
)


def add_typing_registries(registries: Callable[[], list[Any]]) -> None:
    """A target's typing registries of globals (``registries()`` gives them) are searched too."""
    _target_registries.append(registries)


def _global_registries() -> list[Any]:  # numba's typing registries (templates.Registry, untyped)
    """numba's typing registries of globals: the builtin ones and those installed in the typing contexts."""
    from numba.core.typing import templates

    registries = [templates.builtin_registry, *numba.core.registry.cpu_target.typing_context._registries]
    for more in _target_registries:
        registries += more()
    unique = {id(registry): registry for registry in registries}
    return list(unique.values())


def python_function(callee: object) -> pytypes.FunctionType | None:
    """The Python function to compile for ``callee``: a plain function itself, or the ``py_func`` of a numba
    dispatcher (``@numba.njit``, ``@cuda.jit``, ``@cuda.jit(device=True)``: overdub compiles it as any function
    of its own) or of an ``od.jit`` kernel; else None."""
    if isinstance(callee, pytypes.FunctionType):
        return callee
    py_func = getattr(callee, "py_func", None)
    return py_func if isinstance(py_func, pytypes.FunctionType) else None


def dispatcher_call(
    context: TypingContext, dispatcher: Dispatcher, args: tuple[types.Type, ...], kws: dict[str, types.Type]
) -> tuple[Signature, object]:
    """Type a call of a numba dispatcher (compiling it for ``args``): (signature, impl key)."""
    fnty = types.Dispatcher(dispatcher)
    sig: Signature = context.resolve_function_type(fnty, args, kws)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return sig, fnty.get_impl_key(sig)


def call_sites() -> list[str]:
    """The source lines of the calls numba is typing on this thread, innermost first ("file.py:12")."""
    # numba internals: the typing constraints on the stack (CallConstraint, IntrinsicCallConstraint,
    # TypeVarConstraint for attribute reads) carry the source location being typed
    sites: list[str] = []
    frame: pytypes.FrameType | None = sys._getframe(1)
    while frame is not None:
        constraint: Any = frame.f_locals.get("self")  # any frame's self: numba's constraints are the ones read
        if type(constraint).__name__.endswith("Constraint") and getattr(constraint, "loc", None) is not None:
            loc = constraint.loc
            site = f"{loc.short()}" if hasattr(loc, "short") else f"{loc.filename}:{loc.line}"
            if not sites or sites[-1] != site:
                sites.append(site)
        frame = frame.f_back
    return sites


# --- numba's errors -------------------------------------------------------------------------------------


# numba's settings asking each compile to print what it makes (NUMBA_DUMP_IR=1, ...), in numba's config and
# numba-cuda's own copy of it
_DUMPS = (
    "DUMP_BYTECODE",
    "DUMP_CFG",
    "DUMP_IR",
    "DUMP_SSA",
    "DUMP_ANNOTATION",
    "DUMP_LLVM",
    "DUMP_FUNC_OPT",
    "DUMP_OPTIMIZED",
    "DUMP_ASSEMBLY",
    "DEBUG_TYPEINFER",
)


def dumps_requested() -> bool:
    """Do numba's settings ask compiles to print what they make (``NUMBA_DUMP_IR`` and the like, or
    numba-cuda's ``override_config`` of them)? Then code is compiled, not loaded or reused, where a compile
    is asked for."""
    configs = [numba.core.config, sys.modules.get("numba.cuda.core.config")]
    return any(getattr(config, name, 0) for config in configs if config is not None for name in _DUMPS)


def compile_error_message(exc: BaseException) -> str | None:
    """numba's own message for a compile failure (it names the kernel's source line), or None when the
    exception is not numba's."""
    if isinstance(exc, numba.core.errors.NumbaError) or type(exc).__module__.startswith("numba"):
        return str(exc).strip()
    return None


def numba_error_class(exc: BaseException) -> type[BaseException] | None:
    """The class of ``exc`` when it is one of numba's own errors (TypingError, LoweringError, ...), else None."""
    return type(exc) if isinstance(exc, numba.core.errors.NumbaError) else None
