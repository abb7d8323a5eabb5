"""numba's side of module proxies: a :class:`~overdub.rewrite.ModuleProxy` (a module seen from a context
chain) is a compile-time constant whose attributes are typed as numba would type the real module's, except
that what the chain replaces -- a callable come back Overdubbed, a submodule's proxy, a target's replacement
-- is a constant of its own type."""

from __future__ import annotations

import sys

from numba.core import cgutils, types
from numba.core.imputils import lower_getattr_generic
from numba.core.typing.templates import AttributeTemplate, infer_getattr

from ..rewrite import ModuleProxy
from ..types import typeof
from .calls import call_sites, register_opaque


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
    """(the attribute as the chain sees it, the module whose own attribute it is as numba types it -- None where
    the chain changed it: Overdubbed, a proxy, a target's replacement). That module is the proxy's, or the one
    it re-exports the name from (``__overdub_reexports__``: ``overdub.cuda`` re-exports numba-cuda's names,
    whose typing numba-cuda keys on its own module, as ``cuda.threadIdx`` and ``cuda.shared``)."""
    try:
        value = proxy.attribute(attr)
    except AttributeError as exc:
        sites = call_sites()
        raise AttributeError(f"{exc}{' (at ' + sites[0] + ')' if sites else ''}") from None
    module = proxy.module
    if value is not getattr(module, attr, None):
        return value, None
    origin = sys.modules.get(getattr(module, "__overdub_reexports__", ""))
    return value, origin if origin is not None and getattr(origin, attr, None) is value else module


@infer_getattr
class _ModuleProxyAttributes(AttributeTemplate):
    key = ModuleProxyType

    def generic_resolve(self, typ, attr):
        value, module = _seen_attribute(typ.proxy, attr)
        if module is not None:
            return self.context.resolve_getattr(types.Module(module), attr)
        return typeof(value)


@lower_getattr_generic(ModuleProxyType)
def _lower_module_proxy_getattr(context, builder, typ, value, attr):
    seen, module = _seen_attribute(typ.proxy, attr)
    if module is None:  # Overdubbed, a proxy, or a target's replacement: a constant
        return context.get_constant_generic(builder, typeof(seen), seen)
    module_type = types.Module(module)
    impl = context.get_getattr(module_type, attr)
    if impl is not None:  # the target's own lowering: module constants, special registers
        return impl(context, builder, module_type, context.get_dummy_value(), attr)
    attr_type = context.typing_context.resolve_getattr(module_type, attr)
    return cgutils.get_null_value(context.get_value_type(attr_type))  # functions, submodules: opaque
