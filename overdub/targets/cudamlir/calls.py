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

import weakref
from dataclasses import dataclass
from typing import Any

from numba.core.target_extension import target_override
from numba_cuda_mlir.descriptor import mlir_target
from numba_cuda_mlir.numba_cuda import types as mt
from numba_cuda_mlir.numba_cuda.typing.typeof import typeof_impl

from ...resolve import OverdubCallType
from ...rewrite import ModuleProxy, Overdubbed
from .translate import Untranslatable, to_numba

__all__ = ["MLIRMethod", "MLIRBuiltin", "MLIRCallType", "numba_cuda_typing_context"]


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


def numba_cuda_typing_context() -> Any:
    """The typing context overdub decides calls with on this target: numba-cuda's, as on the CUDA target (the
    kernel language's placeholders are numba-cuda's own objects)."""
    from numba.cuda.descriptor import cuda_target  # type: ignore[import-not-found]

    context = cuda_target.typing_context
    context.refresh()  # its registries installed (a no-op once they are)
    return context


class MLIRCallType(mt.Callable, mt.Opaque):  # type: ignore[misc]  # numba-cuda-mlir's types are untyped
    """numba-cuda-mlir's type of one Overdubbed callee: dispatch happens in ``get_call_type``, as numba's
    :class:`~overdub.resolve.OverdubCallType` does it (the very one, on numba's types)."""

    def __init__(self, site: Overdubbed) -> None:
        self.site = site
        self.numba_type = OverdubCallType(site)
        self.lowerings: dict[tuple[object, ...], MLIRMethod | MLIRBuiltin | None] = {}
        super().__init__(name=f"mlir-{self.numba_type.name}")
        lowerings = self.lowerings

        def lower_call(lower: Any, target: Any, args: list[Any], kws: list[Any]) -> None:
            _lower_call(lowerings, lower, target, args, kws)

        mlir_target.target_context.insert_func_defn([(lower_call, site, (mt.VarArg(mt.Any),))])

    @property
    def key(self) -> Overdubbed:
        return self.site

    def get_call_type(self, context: Any, args: Any, kws: Any) -> Any:
        from ...operators import OperatorSite
        from .translate import signature_to_mlir

        try:
            nargs = tuple(to_numba(a) for a in args)
            nkws = {k: to_numba(v) for k, v in kws.items()}
        except Untranslatable as exc:
            raise _refusal(self.site, str(exc)) from None
        with target_override("cuda"):  # numba-cuda's templates answer for its own target only
            sig, impl_key = self.numba_type._resolved(numba_cuda_typing_context(), nargs, nkws)
        if isinstance(impl_key, (MLIRMethod, MLIRBuiltin)):
            mlir_sig = impl_key.sig
        elif impl_key is None and isinstance(self.site, OperatorSite):
            mlir_sig = signature_to_mlir(sig)  # numba's own operator: the node is restored after typing
        else:
            raise _refusal(self.site, f"a call resolved to {impl_key!r}, which numba-cuda-mlir cannot lower")
        self.lowerings[tuple(mlir_sig.args)] = impl_key
        self.lowerings[tuple(args)] = impl_key
        return mlir_sig

    def get_call_signatures(self) -> tuple[list[Any], bool]:
        return [], True

    def get_impl_key(self, sig: Any) -> object:
        return self.site


def _refusal(site: Overdubbed, why: str) -> TypeError:
    name = getattr(site.callee, "__qualname__", repr(site.callee))
    return TypeError(f"{name}: the cuda-mlir target cannot compile this call: {why}")


_call_types: weakref.WeakKeyDictionary[Overdubbed, MLIRCallType] = weakref.WeakKeyDictionary()


@typeof_impl.register(Overdubbed)  # type: ignore[untyped-decorator]
def _typeof_overdubbed(value: Overdubbed, c: object) -> MLIRCallType:
    found = _call_types.get(value)
    if found is None:
        found = _call_types.setdefault(value, MLIRCallType(value))
    return found


def _lower_call(
    lowerings: dict[tuple[object, ...], MLIRMethod | MLIRBuiltin | None],
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
    if isinstance(impl, MLIRBuiltin):
        builder = lower.get_registered_builder(impl.callee, impl.sig)
        if builder is None:
            raise NotImplementedError(f"numba-cuda-mlir has no lowering of {impl.callee!r} for {impl.sig}")
        builder(lower, target, args, kws)
        return
    raise NotImplementedError(f"no lowering recorded for a call with {argtypes}")


class _ChainView:
    """A module as a chain sees it, for numba-cuda-mlir's module type: its attributes are what the chain
    makes of them (Overdubbed callables, proxies of submodules, the target's replacements)."""

    def __init__(self, proxy: ModuleProxy) -> None:
        self.proxy = proxy
        self.__name__ = proxy.module.__name__

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.proxy.attribute(name)

    def __repr__(self) -> str:
        return f"<module {self.__name__} as a chain sees it>"


_views: weakref.WeakKeyDictionary[ModuleProxy, _ChainView] = weakref.WeakKeyDictionary()


@typeof_impl.register(ModuleProxy)  # type: ignore[untyped-decorator]
def _typeof_module_proxy(value: ModuleProxy, c: object) -> Any:
    view = _views.get(value)
    if view is None:
        view = _views.setdefault(value, _ChainView(value))
    return mt.Module(view)
