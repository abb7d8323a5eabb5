"""The typing bridge: where overdub meets numba's type system.

Everything that reaches into numba's typing lives here and in the target modules, so that replacing
numba-cuda touches only these places. It gives numba:

* :func:`register_opaque`, through which the driver (:mod:`overdub.compiler`) gives each
  :class:`~overdub.rewrite.Overdubbed` callee the numba type whose typing is where dispatch happens;
* :func:`delegate` and :func:`dispatcher_call`, which type calls numba itself knows;
* a type for each :class:`~overdub.rewrite.ModuleProxy`, whose attributes are typed as numba would type the
  real module's, except that callables come back Overdubbed;
* :class:`~overdub.types.PtrType` values: a pointer data model, ``p[i]`` and ``p[i] = v``, and unboxing of
  :class:`~overdub.intrinsics.Pointer` arguments on the CPU;
* :class:`HiddenArgumentCall`, how a function compiled with a launch's state as its hidden first parameter
  is called: with its caller's own hidden first argument.

numba-cuda reads the registrations of numba's core registries made outside numba itself, so each
registration here serves both targets.
"""

from __future__ import annotations

import operator
import sys
import types as pytypes
import weakref

import numba
import numpy as np
from numba.core import cgutils, sigutils, types
from numba.core.extending import NativeValue, models, register_model, typeof_impl, unbox
from numba.core.imputils import lower_builtin, lower_constant, lower_getattr_generic
from numba.core.typing.templates import (
    AbstractTemplate,
    AttributeTemplate,
    fold_arguments,
    infer_getattr,
    infer_global,
    signature,
)
from numba.core.utils import pysignature
from numba.np import numpy_support

from . import structbridge  # noqa: F401  (registers numba's typing and lowering of struct values)
from . import world
from .rewrite import ModuleProxy
from .types import PtrType, typeof


def unliteral(t):
    return types.unliteral(t)


# --- opaque compile-time objects -----------------------------------------------------------------------


def register_opaque(python_class: type, numba_type: type) -> None:
    """Let each value of ``python_class`` appear in compiled code as a compile-time constant of the numba type
    ``numba_type(value)`` (its data is never read: dispatch and attribute typing use the type alone)."""
    typeof_impl.register(python_class)(lambda value, c: numba_type(value))
    register_model(numba_type)(models.OpaqueModel)
    lower_constant(numba_type)(lambda context, builder, ty, pyval: context.get_dummy_value())


class ModuleProxyType(types.Dummy):
    """The numba type of a module seen from a context chain."""

    def __init__(self, proxy: ModuleProxy):
        self.proxy = proxy
        super().__init__(name=f"module({proxy.module.__name__})")

    @property
    def key(self):
        return self.proxy


register_opaque(ModuleProxy, ModuleProxyType)


def _seen_attribute(proxy: ModuleProxy, attr: str):
    """(the attribute as the chain sees it, whether that is the module's own value -- not Overdubbed, not a
    proxy, not a target's replacement)."""
    try:
        value = proxy.attribute(attr)
    except AttributeError as exc:
        sites = call_sites()
        raise AttributeError(f"{exc}{' (at ' + sites[0] + ')' if sites else ''}") from None
    return value, value is getattr(proxy.module, attr, None)


@infer_getattr
class _ModuleProxyAttributes(AttributeTemplate):
    key = ModuleProxyType

    def generic_resolve(self, typ, attr):
        value, own = _seen_attribute(typ.proxy, attr)
        if own:
            return self.context.resolve_getattr(types.Module(typ.proxy.module), attr)
        return typeof(value)


@lower_getattr_generic(ModuleProxyType)
def _lower_module_proxy_getattr(context, builder, typ, value, attr):
    seen, own = _seen_attribute(typ.proxy, attr)
    if not own:  # Overdubbed, a proxy, or a target's replacement: a constant
        return context.get_constant_generic(builder, typeof(seen), seen)
    module_type = types.Module(typ.proxy.module)
    impl = context.get_getattr(module_type, attr)
    if impl is not None:  # the target's own lowering: module constants, special registers
        return impl(context, builder, module_type, context.get_dummy_value(), attr)
    attr_type = context.typing_context.resolve_getattr(module_type, attr)
    return cgutils.get_null_value(context.get_value_type(attr_type))  # functions, submodules: opaque


def fold_call(pyfunc, argtypes: tuple, kws: dict) -> tuple[tuple, object]:
    """Positional argument types for a call of ``pyfunc`` with keywords and defaults resolved (numba's
    ``Omitted`` for a default), and the Python signature lowering folds the call's arguments with."""
    pysig = pysignature(pyfunc)
    folded = fold_arguments(
        pysig,
        argtypes,
        kws,
        lambda index, param, value: value,
        lambda index, param, default: types.Omitted(default),
        lambda index, param, values: types.StarArgTuple(tuple(values)),
    )
    return tuple(folded), pysig


def delegate(context, callee, args: tuple, kws: dict):
    """Type a call of something numba itself knows (a builtin, a numba intrinsic): (signature, impl key).

    Keyword arguments of a Python placeholder (``carray(ptr, shape, dtype=...)``) are folded into positions
    first, its defaults passed as numba's ``Omitted``, and the signature carries the placeholder's Python
    signature, with which lowering folds the call's own keyword arguments the same way."""
    pysig = None
    if kws and isinstance(callee, pytypes.FunctionType):
        args, pysig = fold_call(callee, args, kws)
        kws = {}
    fnty = context.resolve_value_type(callee)
    sig = context.resolve_function_type(fnty, args, kws)
    if sig is None:
        return None, None
    _note_typing_modules(fnty)
    impl_key = fnty.get_impl_key(sig)
    return (sig if pysig is None else sig.replace(pysig=pysig)), impl_key


TYPED_IN = "typed by numba templates of the module"


def _note_typing_modules(fnty) -> None:
    """Record on the node being built (in its ``needs``, which its callers inherit) each module outside numba
    and overdub whose typing templates may have typed this call -- an ``@overload`` written in the user's
    code, say: the disk cache, which cannot check such code, then does not store what was built. (numba
    internals: a template's ``_overload_func`` and ``_definition_func``.)"""
    needs = getattr(world.being_built(), "needs", None)
    if needs is None:
        return
    for template in getattr(fnty, "templates", ()):
        for source in (
            template,
            getattr(template, "_overload_func", None),
            getattr(template, "_definition_func", None),
        ):
            module = getattr(source, "__module__", None)
            if isinstance(module, str) and not module.startswith(("numba", "overdub")):
                needs.add(f"{TYPED_IN} {module}")


def always_inlined_overload(context, callee, args: tuple, kws: dict):
    """The Python implementation an ``@overload(callee, inline="always")`` gives for these argument types, or
    None. numba inlines such calls in its IR before lowering, which a call typed through overdub's dispatch
    never reaches; overdub compiles the implementation as a callee instead. (numba internals: the template's
    ``_inline`` and ``_overload_func``.)"""
    fnty = context.resolve_value_type(callee)
    for template in getattr(fnty, "templates", ()):
        inline = getattr(template, "_inline", None)
        if inline is not None and inline.is_always_inline and hasattr(template, "_overload_func"):
            impl = template._overload_func(*args, **kws)
            if isinstance(impl, pytypes.FunctionType):
                return impl
    return None


def numba_implements(context, callee) -> bool:
    """Does numba's typing have its own registration for ``callee`` (``@overload``, ``@intrinsic``, a typing
    template)? Then a Python body it may have is a placeholder. (numba internals: the typing context's
    registry of globals.)"""
    return context._lookup_global(callee) is not None


def python_function(callee):
    """The Python function to compile for ``callee``: a plain function itself, or the ``py_func`` of a numba
    dispatcher (``@numba.njit``, ``@cuda.jit``, ``@cuda.jit(device=True)``: overdub compiles it as any function
    of its own) or of an ``od.jit`` kernel; else None."""
    if isinstance(callee, pytypes.FunctionType):
        return callee
    py_func = getattr(callee, "py_func", None)
    return py_func if isinstance(py_func, pytypes.FunctionType) else None


def typeof_or_none(value):
    """The numba type of ``value`` as a launch argument, or None where numba has none for it."""
    try:
        return typeof(value)
    except ValueError:
        return None


def signature_argtypes(signature) -> tuple:
    """The argument types of a numba signature: a string ``"void(float32[:], int64)"`` or a signature object."""
    return tuple(sigutils.normalize_signature(signature)[0])


def array_fits(value, ty) -> bool:
    """Can ``value`` be passed where a signature says ``ty``? (An array only where ``ty`` is an array of its
    rank and dtype; anything else only where ``ty`` is not an array.)"""
    if not isinstance(ty, types.Array):
        return not hasattr(value, "__cuda_array_interface__") and not hasattr(value, "__array_interface__")
    dtype = getattr(value, "dtype", None)
    try:
        return getattr(value, "ndim", None) == ty.ndim and numpy_support.from_dtype(dtype) == ty.dtype
    except Exception:  # a dtype numba does not know: no
        return False


def as_scalar_of(value, ty):
    """``value`` as a numpy scalar of the scalar type ``ty`` (as numba-cuda converts a launch's arguments to an
    explicit signature); other values unchanged."""
    if isinstance(ty, (types.Integer, types.Float, types.Complex, types.Boolean)) and isinstance(
        value, (int, float, complex, bool, np.generic)
    ):
        return np.asarray(value).astype(numpy_support.as_dtype(ty))[()]  # wraps, as a C cast does
    return value


def dispatcher_call(context, dispatcher, args: tuple, kws: dict):
    """Type a call of a numba dispatcher (compiling it for ``args``): (signature, impl key)."""
    fnty = types.Dispatcher(dispatcher)
    sig = context.resolve_function_type(fnty, args, kws)
    return sig, fnty.get_impl_key(sig)


def call_sites() -> list[str]:
    """The source lines of the calls numba is typing on this thread, innermost first ("file.py:12")."""
    # numba internals: the typing constraints on the stack (CallConstraint, IntrinsicCallConstraint,
    # TypeVarConstraint for attribute reads) carry the source location being typed
    sites, frame = [], sys._getframe(1)
    while frame is not None:
        constraint = frame.f_locals.get("self")
        if type(constraint).__name__.endswith("Constraint") and getattr(constraint, "loc", None) is not None:
            loc = constraint.loc
            site = f"{loc.short()}" if hasattr(loc, "short") else f"{loc.filename}:{loc.line}"
            if not sites or sites[-1] != site:
                sites.append(site)
        frame = frame.f_back
    return sites


# --- typed pointers -------------------------------------------------------------------------------------

register_model(PtrType)(models.PointerModel)


def element_address(context, builder, ptr_type, ptr, index_type, index):
    index = context.cast(builder, index, index_type, types.intp)
    return builder.gep(ptr, [index])


def load_element(context, builder, ptr_type, ptr, index_type, index):
    address = element_address(context, builder, ptr_type, ptr, index_type, index)
    return context.unpack_value(builder, ptr_type.dtype, address)


def store_element(context, builder, ptr_type, ptr, index_type, index, value_type, value):
    value = context.cast(builder, value, value_type, ptr_type.dtype)
    address = element_address(context, builder, ptr_type, ptr, index_type, index)
    context.pack_value(builder, ptr_type.dtype, value, address)


@infer_global(operator.getitem)
class _PtrGetItem(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 2 and isinstance(args[0], PtrType) and isinstance(args[1], types.Integer):
            return signature(args[0].dtype, args[0], unliteral(args[1]))


@infer_global(operator.setitem)
class _PtrSetItem(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 3 and isinstance(args[0], PtrType) and isinstance(args[1], types.Integer):
            return signature(types.none, args[0], unliteral(args[1]), args[0].dtype)


@lower_builtin(operator.getitem, PtrType, types.Integer)
def _ptr_getitem(context, builder, sig, args):
    return load_element(context, builder, sig.args[0], args[0], sig.args[1], args[1])


@lower_builtin(operator.setitem, PtrType, types.Integer, types.Any)
def _ptr_setitem(context, builder, sig, args):
    store_element(context, builder, sig.args[0], args[0], sig.args[1], args[1], sig.args[2], args[2])
    return context.get_dummy_value()


@unbox(PtrType)
def _unbox_pointer(typ, obj, c):
    address_obj = c.pyapi.object_getattr_string(obj, "address")
    address = c.pyapi.long_as_longlong(address_obj)
    c.pyapi.decref(address_obj)
    ptr = c.builder.inttoptr(address, c.context.get_value_type(typ))
    return NativeValue(ptr, is_error=c.pyapi.c_api_error())


def compile_error_message(exc: BaseException) -> str | None:
    """numba's own message for a compile failure (it names the kernel's source line), or None when the
    exception is not numba's."""
    if isinstance(exc, numba.core.errors.NumbaError) or type(exc).__module__.startswith("numba"):
        return str(exc).strip()
    return None


def numba_error_class(exc: BaseException) -> type | None:
    """The class of ``exc`` when it is one of numba's own errors (TypingError, LoweringError, ...), else None."""
    return type(exc) if isinstance(exc, numba.core.errors.NumbaError) else None


# --- the hidden state argument --------------------------------------------------------------------------


def hidden_argument(context, builder, hidden_type):
    """The hidden first argument (of numba type ``hidden_type``) of the function being lowered.

    numba internals: the LLVM function's arguments after the calling convention's own (``get_arguments``),
    unpacked by the data model's argument packer. Every function compiled for a launch with state -- the
    kernel, each callee, the CPU target's grid loop that inlines the kernel -- takes the state first, so the
    function being lowered always has it, whichever was inlined into it at numba IR level."""
    # numba-cuda keeps the calling convention on the descriptor of the function being lowered
    call_conv = getattr(context.fndesc, "call_conv", None) or context.call_conv
    packer = context.get_arg_packer([hidden_type])
    raw = call_conv.get_arguments(builder.function)[: len(packer.argument_types)]
    return packer.from_arguments(builder, raw)[0]


def _without_first_parameter(pysig):
    return pysig.replace(parameters=list(pysig.parameters.values())[1:]) if pysig is not None else None


class HiddenArgumentCall:
    """Calls of a compiled function taking a hidden first argument, as its callers see it: a signature
    without that argument, and an implementation, registered with the target context for as long as this
    object lives, that passes the caller's own hidden first argument along (numba internals: the target
    context's function definitions, ``insert_func_defn`` / ``remove_user_function``)."""

    __slots__ = ("sig", "impl_key", "__weakref__")

    def __init__(self, target_context, sig, impl_key):
        hidden_type = sig.args[0]
        self.impl_key = ("overdub.hidden_argument", impl_key)
        self.sig = signature(sig.return_type, *sig.args[1:]).replace(
            pysig=_without_first_parameter(getattr(sig, "pysig", None))
        )

        def call(context, builder, outer_sig, args, loc=None):
            hidden = hidden_argument(context, builder, hidden_type)
            return context.get_function(impl_key, sig)(builder, [hidden, *args], loc=loc)

        target_context.insert_func_defn([(call, self.impl_key, self.sig.args)])
        weakref.finalize(self, target_context.remove_user_function, self.impl_key)
