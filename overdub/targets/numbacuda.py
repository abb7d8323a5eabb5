"""numba-cuda joined: overdub's operator passes and struct types registered with numba-cuda's own pipeline
and typeof, once numba-cuda is imported -- by a program, or by the CUDA target -- before it compiles anything.

numba-cuda carries its own copy of numba's front end (IR modules, rewrite registry, typeof), so what overdub
registers with numba's must be registered with numba-cuda's too. This module is the one place outside the
CUDA target's package that reaches numba-cuda, and only through a post-import hook: ``import overdub``
does not import numba-cuda.
"""

from __future__ import annotations

import warnings
from types import ModuleType

from .. import operators, postimport
from ..bridge.structs import typeof_struct_class
from ..types import LatticeMeta, keep_as_is

__all__ = ["numba_cuda_joined", "performance_warning", "check_debug_options"]


def numba_cuda_joined(numba_cuda: ModuleType) -> None:
    """numba internals: numba-cuda's rewrite registry runs the operator passes over its own IR's nodes; its
    typeof, whose registration for ``type`` answers for every class (so a class never reaches its fallback to
    numba's core typeof), types struct classes as numba's does."""
    # numba.cuda is numba-cuda's package at run time; mypy finds numba's own numba/cuda, which has neither
    from numba.cuda.core import errors, ir, rewrites  # type: ignore[import-not-found]
    from numba.cuda.misc.special import literal_unroll  # type: ignore[import-not-found]
    from numba.cuda.typing.typeof import typeof_impl  # type: ignore[import-not-found]

    operators.join_pipeline(rewrites, ir, errors)
    typeof_impl.register(LatticeMeta)(typeof_struct_class)
    keep_as_is(literal_unroll)  # numba-cuda's own, which its unrolling pass finds by identity


postimport.when_imported("numba.cuda", numba_cuda_joined)


def performance_warning(message: str, setting: str, stacklevel: int) -> None:
    """numba-cuda's ``NumbaPerformanceWarning``, where its configuration has it on (``setting``, and
    ``DISABLE_PERFORMANCE_WARNINGS`` off): the class and message its programs and tests filter on."""
    from numba.cuda.core import config, errors

    if getattr(config, setting) and not config.DISABLE_PERFORMANCE_WARNINGS:
        warnings.warn(errors.NumbaPerformanceWarning(message), stacklevel=stacklevel + 1)


def check_debug_options(debug: object, opt: object, lineinfo: object, stacklevel: int) -> None:
    """numba-cuda's ``NumbaInvalidConfigWarning`` for options that do not go together, its defaults read as it
    reads them (``debug`` None: ``CUDA_DEBUGINFO_DEFAULT``; ``opt`` None: ``OPT`` not 0): ``debug`` with ``opt``
    (overdub compiles a debug kernel unoptimised, where numba-cuda may crash) and ``debug`` with ``lineinfo``
    (debug info includes line info)."""
    from numba.cuda.core import config
    from numba.cuda.core.errors import NumbaInvalidConfigWarning  # type: ignore[import-not-found]

    debug = config.CUDA_DEBUGINFO_DEFAULT if debug is None else debug
    opt = (config.OPT != 0) if opt is None else opt
    if debug and opt:
        message = "debug=True with opt=True is not supported by CUDA: overdub compiles it with opt=False"
        warnings.warn(NumbaInvalidConfigWarning(message), stacklevel=stacklevel + 1)
    if debug and lineinfo:
        message = "debug and lineinfo are mutually exclusive: debug gives full debug info, line info included"
        warnings.warn(NumbaInvalidConfigWarning(message), stacklevel=stacklevel + 1)
