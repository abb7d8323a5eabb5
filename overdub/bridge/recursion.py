"""A method instance calling itself: typed as numba types a self-recursive function -- the return type its
other ``return`` statements give so far (numba's partial type inference of the function being typed) -- and
lowered as a call of the function being lowered, which is the method itself.

numba internals: the typing context's call stack (the frame of each function being typed, with its type
inferer: ``return_types_from_partial``, ``add_return_type``, which numba checks for convergence; its cache of
failed resolutions, off while the partial inference leaves the recursive call untyped), the calling
convention of the function being lowered (``call_function``) and the target context's function definitions
(``insert_func_defn`` / ``remove_user_function``).
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from numba.core import cgutils, config
from numba.core.errors import TypingError
from numba.core.typing.templates import Signature, signature

from .hidden import hidden_argument

__all__ = ["SelfCall", "self_call_signature", "partial_return_type"]

_keys = itertools.count()


class _Inferring(threading.local):
    def __init__(self) -> None:
        self.frames: set[object] = set()  # the frames whose return type this thread is inferring partially


_inferring = _Inferring()


def self_call_signature(
    typing_context: Any, func: Callable[..., Any], typed_args: tuple[Any, ...], argtypes: tuple[Any, ...]
) -> Signature | None:
    """The signature of a call of ``func`` with ``argtypes`` from inside itself, being typed for ``typed_args``
    (its state first, where it takes one): the return type numba infers so far (numba's own rule for a
    self-recursive function: from its returns that do not recurse). A TypingError, numba's, where there is
    none ("cannot type infer runaway recursion"); None where ``func`` is not being typed for them here."""
    return_type = partial_return_type(typing_context, func, typed_args)
    if return_type is None:
        return None
    sig: Signature = signature(return_type, *argtypes)  # type: ignore[no-untyped-call]  # numba's is unannotated
    return sig


def partial_return_type(typing_context: Any, func: Callable[..., Any], typed_args: tuple[Any, ...]) -> Any:
    """The return type the typing of ``func`` for ``typed_args`` infers so far, in ``typing_context`` (numba's,
    numba-cuda's, or numba-cuda-mlir's copy of it), recorded as the type the function must return; None where
    ``func`` is not being typed for them there."""
    frame = typing_context.callstack.match(func, typed_args)
    if frame is None:
        return None
    inferring = _inferring.frames
    if frame in inferring:  # the partial inference's own recursive call: untyped, as numba skips it there
        raise _typing_error(frame)("a recursive call is left out of the partial inference of its return type")
    inferring.add(frame)
    settings: Any = getattr(sys.modules[type(frame.typeinfer).__module__], "config", config)  # the inferer's
    caching, settings.DISABLE_TYPEINFER_FAIL_CACHE = getattr(settings, "DISABLE_TYPEINFER_FAIL_CACHE", 0), True
    try:  # (numba's cache of failed resolutions would keep the skipped call's failure for the real inference)
        return_type = frame.typeinfer.return_types_from_partial()
    finally:
        settings.DISABLE_TYPEINFER_FAIL_CACHE = caching
        inferring.discard(frame)
    if return_type is None:
        raise _typing_error(frame)("cannot type infer runaway recursion")
    frame.add_return_type(return_type)  # numba checks that the function's final return type is this one
    return return_type


def _typing_error(frame: Any) -> type[Exception]:
    """The TypingError class the type inferer of ``frame`` catches: numba's, or numba-cuda's own copy."""
    found: type[Exception] = getattr(sys.modules[type(frame.typeinfer).__module__], "TypingError", TypingError)
    return found


class SelfCall:
    """The calls a function makes of itself, as its callers see them: ``sig`` (without the hidden state
    argument, where ``hidden`` gives its type), lowered as a call of the function being lowered, registered
    with ``target_context`` for as long as this object lives."""

    __slots__ = ("sig", "impl_key", "__weakref__")

    def __init__(self, target_context: Any, sig: Signature, hidden: Any = None) -> None:
        self.sig = sig
        self.impl_key = ("overdub.self_call", next(_keys))
        full = sig if hidden is None else signature(sig.return_type, hidden, *sig.args)  # type: ignore[no-untyped-call]  # numba's is unannotated

        def call(context: Any, builder: Any, outer_sig: Signature, args: Any, loc: Any = None) -> Any:
            call_conv = getattr(context.fndesc, "call_conv", None) or context.call_conv
            values = list(args) if hidden is None else [hidden_argument(context, builder, hidden), *args]  # type: ignore[no-untyped-call]  # the bridge's is unannotated
            status, result = call_conv.call_function(builder, builder.function, full.return_type, full.args, values)
            with cgutils.if_unlikely(builder, status.is_error):  # type: ignore[no-untyped-call]  # numba's is unannotated
                call_conv.return_status_propagate(builder, status)
            return result

        target_context.insert_func_defn([(call, self.impl_key, sig.args)])
        weakref.finalize(self, target_context.remove_user_function, self.impl_key)
