"""The hidden state argument: how a function compiled with a launch's state as its hidden first parameter is
called -- with its caller's own hidden first argument. The rewrite (:mod:`overdub.rewrite`) gives every
function compiled in a chain with state that parameter; the targets register a :class:`HiddenArgumentCall`
for each such callee, so that its callers, which do not name the state, pass theirs along."""

from __future__ import annotations

import weakref

from numba.core.typing.templates import signature


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
