"""The typing bridge: where overdub meets numba's type system.

Everything that reaches into numba's typing lives in this package and in the targets, so that replacing
numba-cuda touches only these places. Each module is one concept:

* :mod:`~overdub.bridge.calls` -- the typing bridge proper: compile-time constants whose numba type decides a
  call (:func:`register_opaque`), delegation to numba's own typing, the call sites being typed, numba's errors;
* :mod:`~overdub.bridge.proxies` -- the numba type of a :class:`~overdub.rewrite.ModuleProxy`;
* :mod:`~overdub.bridge.pointers` -- typed pointers: the data model, ``p[i]``, ``p[i] = v``, CPU unboxing;
* :mod:`~overdub.bridge.hidden` -- how a function taking a launch's state as its hidden first argument is called;
* :mod:`~overdub.bridge.signatures` -- numba-cuda's explicit signatures, as ``od.jit`` takes them.

This face re-exports the typing bridge proper and imports what registers with numba (module proxies, typed
pointers, structs: numba-cuda reads the registrations of numba's core registries made outside numba itself,
so each serves both targets).
"""

from . import (  # noqa: F401  (register numba's typing of pointers, module proxies and struct values)
    pointers,
    proxies,
    structs,
)
from .calls import (
    TypedByTemplates,
    TypingError,
    add_typing_registries,
    always_inlined_overload,
    call_sites,
    compile_error_message,
    delegate,
    dispatcher_call,
    dumps_requested,
    fold_call,
    name_typing_context,
    note_attribute_templates,
    numba_error_class,
    numba_implements,
    python_function,
    register_opaque,
    typing_code,
    unliteral,
)
from .recursion import partial_return_type, self_call_signature
from .signatures import converted_signature

__all__ = [
    "TypedByTemplates",
    "TypingError",
    "add_typing_registries",
    "always_inlined_overload",
    "call_sites",
    "compile_error_message",
    "converted_signature",
    "delegate",
    "dispatcher_call",
    "dumps_requested",
    "fold_call",
    "name_typing_context",
    "note_attribute_templates",
    "numba_error_class",
    "numba_implements",
    "python_function",
    "register_opaque",
    "partial_return_type",
    "self_call_signature",
    "typing_code",
    "unliteral",
]
