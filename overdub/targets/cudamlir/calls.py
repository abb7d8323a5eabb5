"""How numba-cuda-mlir types and lowers what overdub's rewrite puts in a kernel: its Overdubbed callees and
module proxies.

numba-cuda-mlir's front end is a copy of numba-cuda's with its own registries, so overdub registers with it
as it does with numba's: a callee seen from a context chain (:class:`~overdub.rewrite.Overdubbed`) is typed by
:class:`MLIRCallType`, whose typing is overdub's dispatch (:func:`overdub.resolve.resolve_call`, on numba's
types: the translation is :mod:`.translate`); a module seen from a chain is a numba-cuda-mlir module type whose
attributes are what the chain makes of them. What a call resolved to is lowered by numba-cuda-mlir's own
means: a method compiled by this target is a call of its device function (cloned into the kernel's MLIR
module), what numba-cuda implements is numba-cuda-mlir's implementation of the same name.
"""

from __future__ import annotations

import inspect
import sys
import types as pytypes
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from numba.core import types as nt
from numba.core.target_extension import target_override
from numba_cuda_mlir.descriptor import mlir_target
from numba_cuda_mlir.numba_cuda.typing.templates import AttributeTemplate, infer_getattr
from numba_cuda_mlir.numba_cuda.typing.templates import signature as mlir_signature
from numba_cuda_mlir.numba_cuda.typing.typeof import typeof_impl
from numba_cuda_mlir.tools import generate_mangled_name

from ... import bridge
from ...bridge.proxies import _seen_attribute
from ...resolve import OverdubCallType
from ...rewrite import ModuleProxy, Overdubbed
from ...runtime import runtime
from ...types import LatticeMeta, StructType
from ..cuda import _compiling_for as compiling_for
from .translate import Untranslatable, mlir_cuda, mt, shadow, to_mlir, to_numba

if TYPE_CHECKING:
    from ...roots import TargetRoot

__all__ = [
    "MLIRMethod",
    "MLIRBuiltin",
    "MLIRSelfCall",
    "MLIRCallType",
    "numba_cuda_typing_context",
    "callee_name",
    "counterpart",
]


@dataclass(frozen=True, eq=False)
class MLIRMethod:
    """What a call of a method this target compiled lowers to: a call of its device dispatcher."""

    dispatcher: Any  # numba-cuda-mlir's MLIRDispatcher, device=True
    sig: Any  # numba-cuda-mlir's signature of the compile


@dataclass(frozen=True, eq=False)
class MLIRBuiltin:
    """What a call of something numba-cuda implements lowers to: numba-cuda-mlir's implementation of
    ``callee`` (its own object of the same name) for ``sig``."""

    callee: object
    sig: Any


@dataclass(frozen=True, eq=False)
class MLIRSelfCall:
    """What a method's call of itself lowers to: a call of the function being lowered (numba-cuda-mlir's
    ``build_recursive_call``), of numba-cuda-mlir's signature ``sig``."""

    sig: Any


def numba_cuda_typing_context() -> Any:
    """The typing context overdub decides calls with on this target: numba-cuda's, as on the CUDA target (the
    kernel language's placeholders are numba-cuda's own objects)."""
    from numba.cuda.descriptor import cuda_target

    context = cuda_target.typing_context
    context.refresh()  # its registries installed (a no-op once they are)
    return context


class _LoweredCallType(mt.Callable, mt.Opaque):  # type: ignore[misc]  # numba-cuda-mlir's types are untyped
    """numba-cuda-mlir's type of a value whose calls overdub types (``get_call_type``) and lowers: each call as
    its typing resolved it, for its argument types (``lowerings``, :func:`_lowered_by_key`)."""

    def __init__(self, key: object, name: str) -> None:
        self._key = key
        super().__init__(name=name)
        self.lowerings = _lowered_by_key(key)

    @property
    def key(self) -> object:
        return self._key

    def get_call_signatures(self) -> tuple[list[Any], bool]:
        return [], True

    def get_impl_key(self, sig: Any) -> object:
        return self._key


def _typed_once(cache: weakref.WeakKeyDictionary[Any, Any], value: Any, make: Callable[[Any], Any]) -> Any:
    """The one numba-cuda-mlir type of ``value`` (numba-cuda-mlir then sees one type a value), made once."""
    found = cache.get(value)
    if found is None:
        found = cache.setdefault(value, make(value))
    return found


def _as_numba(args: Any, kws: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A call's numba-cuda-mlir argument types as numba's (Untranslatable where one has no counterpart)."""
    return tuple(to_numba(a) for a in args), {k: to_numba(v) for k, v in kws.items()}


class MLIRCallType(_LoweredCallType):
    """numba-cuda-mlir's type of one Overdubbed callee: dispatch happens in ``get_call_type``, as numba's
    :class:`~overdub.resolve.OverdubCallType` does it (the very one, on numba's types)."""

    def __init__(self, site: Overdubbed) -> None:
        self.site = site
        self.numba_type = OverdubCallType(site)
        super().__init__(site, f"mlir-{self.numba_type.name}")

    def get_call_type(self, context: Any, args: Any, kws: Any) -> Any:
        from ...operators import OperatorSite
        from .translate import signature_to_mlir

        try:
            nargs, nkws = _as_numba(args, kws)
        except Untranslatable as exc:
            raise _refusal(self.site, str(exc)) from None
        # numba-cuda's typing, as the CUDA target types (its templates answer for their own target; its
        # @overloads compile for the target's compute capability, not the driver's)
        cc = cast(Any, cast("TargetRoot", self.site.chain[-1]).target).cc
        with target_override("cuda"), compiling_for(cc):  # type: ignore[no-untyped-call]  # numba's is unannotated
            sig, impl_key = self.numba_type._resolved(numba_cuda_typing_context(), nargs, nkws)
        if isinstance(impl_key, (MLIRMethod, MLIRBuiltin, MLIRSelfCall)):
            mlir_sig = impl_key.sig
        elif impl_key is None and isinstance(self.site, OperatorSite):
            mlir_sig = signature_to_mlir(sig)  # numba's own operator: the node is restored after typing,
            self.site.by_numba.add(tuple(mlir_sig.args))  # which reads the call's types, here numba-cuda-mlir's
        else:
            raise _refusal(self.site, f"a call resolved to {impl_key!r}, which numba-cuda-mlir cannot lower")
        self.lowerings[tuple(mlir_sig.args)] = impl_key
        self.lowerings[tuple(args)] = impl_key
        return mlir_sig


def _refusal(site: Overdubbed, why: str) -> TypeError:
    name = getattr(site.callee, "__qualname__", repr(site.callee))
    return TypeError(f"{name}: the cuda-mlir target cannot compile this call: {why}")


_call_types: weakref.WeakKeyDictionary[Overdubbed, MLIRCallType] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._call_types", _call_types)


@typeof_impl.register(Overdubbed)  # type: ignore[untyped-decorator]
def _typeof_overdubbed(value: Overdubbed, c: object) -> MLIRCallType:
    found: MLIRCallType = _typed_once(_call_types, value, MLIRCallType)
    return found


def callee_name(dispatcher: Any, margs: tuple[Any, ...]) -> str:
    """numba-cuda-mlir internals: the name its lowering gives a device function it calls
    (``MLIRLower.build_user_defined_function_call``), under which it reuses a compile of it, this one."""
    called = tuple(t for t in margs if not isinstance(t, mt.Omitted))
    return str(generate_mangled_name(f"{dispatcher.py_func.__qualname__}_{id(dispatcher)}", called))


def _lowered_by_key(key: object) -> dict[tuple[object, ...], MLIRMethod | MLIRBuiltin | MLIRSelfCall | None]:
    """numba-cuda-mlir's lowering of calls of ``key`` (an Overdubbed callee, a struct class): registered with
    its target context, it lowers each call as the typing of its argument types resolved it, recorded in the
    dict returned."""
    lowerings: dict[tuple[object, ...], MLIRMethod | MLIRBuiltin | MLIRSelfCall | None] = {}

    def lower_call(lower: Any, target: Any, args: list[Any], kws: list[Any]) -> None:
        _lower_call(lowerings, lower, target, args, kws)

    mlir_target.target_context.insert_func_defn([(lower_call, key, (mt.VarArg(mt.Any),))])
    return lowerings


def _lower_call(
    lowerings: dict[tuple[object, ...], MLIRMethod | MLIRBuiltin | MLIRSelfCall | None],
    lower: Any,
    target: Any,
    args: list[Any],
    kws: list[Any],
) -> None:
    """numba-cuda-mlir's lowering of a call of an Overdubbed callee: what its typing resolved it to for the
    call's argument types."""
    argtypes = tuple(lower.get_numba_type(a.name) for a in args)
    impl = lowerings.get(argtypes)
    if isinstance(impl, MLIRMethod):
        lower.store_var(target, lower.build_user_defined_function_call(target, impl.dispatcher, args, kws))
        return
    if isinstance(impl, MLIRSelfCall):
        lower.store_var(target, lower.build_recursive_call(target, None, args, kws))
        return
    if isinstance(impl, MLIRBuiltin):
        builder = lower.get_registered_builder(impl.callee, impl.sig)
        if builder is None:
            raise NotImplementedError(f"numba-cuda-mlir has no lowering of {impl.callee!r} for {impl.sig}")
        builder(lower, target, args, kws)
        return
    raise NotImplementedError(f"no lowering recorded for a call with {argtypes}")


class MLIRStructClassType(_LoweredCallType):
    """numba-cuda-mlir's type of a struct class read in a kernel: calling it makes a value. The class binds and
    types the call as on every target (``__overdub_bind__``, on numba's types); the value is made by a device
    function building the struct's named tuple from the fields, each converted to its type."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        super().__init__(cls, f"mlir-class({cls.__qualname__})")

    def get_call_type(self, context: Any, args: Any, kws: Any) -> Any:
        bind = getattr(self.cls, "__overdub_bind__", None)
        if bind is None:
            raise TypeError(f"{self.cls.__qualname__} is an abstract type: it has no values")
        try:
            nargs, nkws = _as_numba(args, kws)
        except Untranslatable as exc:
            raise TypeError(f"{self.cls.__qualname__}: the cuda-mlir target cannot make this value: {exc}") from None
        nargs = tuple(bridge.unliteral(a) for a in nargs)
        nkws = {k: bridge.unliteral(v) for k, v in nkws.items()}
        struct_type, _ = bind(nargs, nkws)  # raises TypeError naming the field that does not convert
        maker = _maker(struct_type)
        folded, pysig = bridge.fold_call(maker.py_func, nargs, nkws)
        margs = tuple(to_mlir(t) for t in folded)
        cres = maker._compile_as_device_callee(margs, abi_name=callee_name(maker, margs))
        # the maker returns the fields as a tuple; the call's value is the struct's named tuple (the same values)
        sig = mlir_signature(to_mlir(struct_type), *cres.signature.args).replace(pysig=pysig)
        method = MLIRMethod(maker, sig)
        self.lowerings[tuple(sig.args)] = self.lowerings[tuple(args)] = method
        return sig


_class_types: weakref.WeakKeyDictionary[type, MLIRStructClassType] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._class_types", _class_types)


def _typeof_struct_class(cls: type, c: object) -> MLIRStructClassType:
    found: MLIRStructClassType = _typed_once(_class_types, cls, MLIRStructClassType)
    return found


def _maker(struct_type: StructType) -> Any:
    """The device function making a value of ``struct_type`` from its fields (the class's parameters, with
    their defaults): the tuple of them, each converted to the field's type (numba-cuda-mlir 0.6.0 lowers no call
    of a named-tuple class); one per struct type, kept on its shadow class."""
    made = shadow(struct_type)
    found = made.__dict__.get("maker")
    if found is not None:
        return found
    spec: inspect.Signature = cast(Any, struct_type.cls).__overdub_spec__.signature  # the fields, their defaults
    names = [name for name, _ in struct_type.fields]
    namespace: dict[str, object] = {}
    converted = []
    for i, (name, ftype) in enumerate(struct_type.fields):
        if isinstance(ftype, StructType):
            converted.append(name)  # bind checked it is a value of that very struct
        else:
            namespace[f"_t{i}"] = to_mlir(ftype)
            converted.append(f"_t{i}({name})")
    source = f"def make({', '.join(names)}):\n    return ({', '.join(converted)},)\n"
    exec(compile(source, f"<overdub: making a {struct_type.name} on cuda-mlir>", "exec"), namespace)
    make = namespace["make"]
    defaults = [p.default for p in spec.parameters.values() if p.default is not inspect.Parameter.empty]
    make.__defaults__ = tuple(defaults) or None  # type: ignore[attr-defined]
    found = mlir_cuda.jit(device=True)(make)
    type.__setattr__(made, "maker", found)
    return found


def _counterparts() -> dict[int, object]:
    """numba-cuda's kernel-language objects -> numba-cuda-mlir's of the same name (by id: numba-cuda's
    stubs are not all hashable)."""
    import numba.cuda
    import numba_cuda_mlir.cuda as mlir_cuda

    found: dict[int, object] = {}
    for name in dir(numba.cuda):
        if name.startswith("_"):
            continue
        ours, theirs = getattr(numba.cuda, name, None), getattr(mlir_cuda, name, None)
        if ours is None or theirs is None or not (callable(ours) or isinstance(ours, pytypes.ModuleType)):
            continue
        found[id(ours)] = theirs
        # the members of a stub class or submodule: cuda.atomic.add, cuda.shared.array, cuda.libdevice.sin
        if isinstance(ours, (type, pytypes.ModuleType)):
            for member in vars(ours):
                value = getattr(ours, member)
                if not member.startswith("_") and hasattr(theirs, member) and callable(value):
                    found.setdefault(id(value), getattr(theirs, member))
    return found


_COUNTERPARTS = _counterparts()


def counterpart(value: object) -> object:
    """numba-cuda-mlir's object for the numba-cuda one ``value`` (``cuda.grid``, ``cuda.threadIdx``), or
    ``value`` itself (a builtin, ``math.sin``, a numpy function: the same object on both)."""
    found = _COUNTERPARTS.get(id(value))
    if found is not None:
        return found
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return value
    if module != "numba.cuda" and not module.startswith("numba.cuda."):
        return value
    theirs: object = sys.modules.get("numba_cuda_mlir.numba_cuda" + module[len("numba.cuda") :])
    for part in qualname.split("."):  # numba.cuda.np.numpy_support.carray: the same path there
        theirs = getattr(theirs, part, None)
    return value if theirs is None else theirs


_typeof_class = typeof_impl.dispatch(type)


@typeof_impl.register(type)  # type: ignore[untyped-decorator]
def _typeof_kernel_language_class(value: type, c: object) -> Any:
    """numba-cuda's stub classes (``cuda.threadIdx``, ``cuda.shared``, ``cuda.atomic``) read in a kernel: the
    type of numba-cuda-mlir's object of the same name, whose typing and lowering then apply (overdub's kernels
    keep numba-cuda's objects: the kernel language its contexts and dispatch are written against)."""
    theirs = _COUNTERPARTS.get(id(value))
    if isinstance(theirs, pytypes.ModuleType):  # cuda.shared, cuda.local, cuda.const: modules there
        return mt.Module(theirs)
    if theirs is not None and theirs is not value:  # typed as numba-cuda-mlir types its own, registered globals
        return mlir_target.typing_context.resolve_value_type(theirs)
    return _typeof_class(value, c)


@typeof_impl.register(nt.Type)  # type: ignore[untyped-decorator]
def _typeof_numba_type(value: nt.Type, c: object) -> Any:
    """A numba type read in a kernel (``numba.float64`` as a ``cuda.shared.array`` dtype): numba-cuda-mlir's
    type of its own counterpart."""
    try:
        return typeof_impl(to_mlir(value), c)
    except Untranslatable as exc:
        raise ValueError(str(exc)) from None


class _ChainView:
    """A module as a chain sees it on this target, the ``pymod`` of its numba-cuda-mlir type: its attributes
    are what the chain makes of them (Overdubbed callables, proxies of submodules, the target's replacements),
    and numba-cuda-mlir's own objects where the chain left numba-cuda's (``cuda.threadIdx``), which its
    lowering reads."""

    def __init__(self, proxy: ModuleProxy) -> None:
        self.proxy = proxy
        self.__name__ = proxy.module.__name__

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        value, module = _seen_attribute(self.proxy, name)
        return value if module is None else getattr(_counterpart_module(module), name, value)

    def __repr__(self) -> str:
        return f"<module {self.__name__} as a chain sees it>"


class MLIRModuleProxyType(mt.Module):  # type: ignore[misc]  # numba-cuda-mlir's types are untyped
    """numba-cuda-mlir's type of a module seen from a context chain (a ``ModuleProxy``)."""

    def __init__(self, view: _ChainView) -> None:
        super().__init__(view)


_views: weakref.WeakKeyDictionary[ModuleProxy, MLIRModuleProxyType] = weakref.WeakKeyDictionary()
runtime.register_cache(f"{__name__}._views", _views)


@typeof_impl.register(ModuleProxy)  # type: ignore[untyped-decorator]
def _typeof_module_proxy(value: ModuleProxy, c: object) -> MLIRModuleProxyType:
    found: MLIRModuleProxyType = _typed_once(_views, value, lambda proxy: MLIRModuleProxyType(_ChainView(proxy)))
    return found


def _counterpart_module(module: pytypes.ModuleType) -> pytypes.ModuleType:
    """numba-cuda-mlir's module for numba-cuda's ``module`` (``numba.cuda`` -> ``numba_cuda_mlir.cuda``), or
    ``module`` itself (``math``, ``numpy``, ``numba``)."""
    if module.__name__ == "numba.cuda" or module.__name__.startswith("numba.cuda."):
        theirs = sys.modules.get("numba_cuda_mlir.cuda" + module.__name__[len("numba.cuda") :])
        if theirs is not None:
            return theirs
    return module


@infer_getattr
class _ModuleProxyAttributes(AttributeTemplate):  # type: ignore[misc]
    """An attribute of a module seen from a chain: what the chain changed (an Overdubbed callable, a proxy, a
    replacement) is typed as a value; what it did not, as numba-cuda-mlir types the attribute of its own module
    of that name (``cuda.threadIdx``, typed by its module's attribute templates)."""

    key = MLIRModuleProxyType

    def generic_resolve(self, typ: MLIRModuleProxyType, attr: str) -> Any:
        value, module = _seen_attribute(typ.pymod.proxy, attr)
        if module is not None:
            return self.context.resolve_getattr(mt.Module(_counterpart_module(module)), attr)
        return self.context.resolve_value_type(value)


typeof_impl.register(LatticeMeta)(_typeof_struct_class)
