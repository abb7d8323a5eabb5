"""overdub: GPU kernels in Python with Julia's semantics.

Device functions are generic functions with multiple dispatch; kernels compile in a context that can
substitute any call; a compiled kernel keeps the edges it consulted, so redefining anything it used makes
the next launch recompile.
"""

import importlib
from typing import TYPE_CHECKING

from . import engines as _engines  # noqa: F401  (the engines' picklers ship the user's code: overdub.travel)
from .context import Context, when_imported
from .dropin import jit
from .extending import method
from .host import overdub
from .intrinsics import Pointer, cuprintln, pointer, state, unsafe_load, unsafe_store, vload, vstore
from .job import CompileError
from .launch import default_target, synchronize
from .memory import struct_array
from .reflect import code_llvm, code_native, code_ptx, code_sass, code_typed, explain, invalidation_tree, stats
from .registry import AmbiguityError, GenericFunction, Method, MethodError, function, methods, which
from .structs import struct
from .targets.registry import ALL, CPU, CUDA
from .types import AbstractType, PtrType, issubtype
from .world import current_world, invalidation_log

if TYPE_CHECKING:  # names imported at their first use (``__getattr__`` below): ``import overdub`` leaves them out
    from .graphs import Graph, graph
    from .precompiling import precompile
    from .scaleout import map_blocks, map_overlap

if TYPE_CHECKING:  # od.cuda: the launch's signature and numba-cuda's names (a module whose call is the launch)
    from .cuda import CudaNamespace

    cuda: CudaNamespace
else:
    from . import cuda

if TYPE_CHECKING:  # the lattice's names as types, for annotations (overdub/annotations.py)
    from .annotations import (
        Any,
        Array,
        Boolean,
        Callee,
        Complex,
        Float,
        Integer,
        Number,
        Ptr,
        bool_,
        complex64,
        complex128,
        float16,
        float32,
        float64,
        int8,
        int16,
        int32,
        int64,
        uint8,
        uint16,
        uint32,
        uint64,
    )
else:
    from .types import (
        Any,
        Array,
        Boolean,
        Callee,
        Complex,
        Float,
        Integer,
        Number,
        Ptr,
        bool_,
        complex64,
        complex128,
        float16,
        float32,
        float64,
        int8,
        int16,
        int32,
        int64,
        uint8,
        uint16,
        uint32,
        uint64,
    )

__version__ = "0.1.0"

# The public names whose modules ``import overdub`` leaves out until a program first reads one (PEP 562):
# precompile's process pool (multiprocessing, concurrent.futures), graphs, and the dask scale-out.
_DEFERRED = {
    "graph": "graphs",
    "Graph": "graphs",
    "precompile": "precompiling",
    "map_blocks": "scaleout",
    "map_overlap": "scaleout",
}


if not TYPE_CHECKING:  # a type checker reads the deferred names' imports above, and no attribute beyond them

    def __getattr__(name: str) -> object:
        module = _DEFERRED.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_DEFERRED})


__all__ = [
    # generic functions and dispatch
    "function",
    "method",
    "GenericFunction",
    "Method",
    "methods",
    "which",
    "MethodError",
    "AmbiguityError",
    # the type lattice
    "Any",
    "Number",
    "Integer",
    "Float",
    "Complex",
    "Boolean",
    "Ptr",
    "PtrType",
    "Array",
    "Callee",
    "issubtype",
    "AbstractType",
    "struct",
    "struct_array",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bool_",
    # contexts
    "Context",
    "CPU",
    "CUDA",
    "ALL",
    "when_imported",
    "overdub",
    "state",
    # launching and intrinsics
    "cuda",
    "jit",
    "synchronize",
    "default_target",
    "graph",
    "Graph",
    "precompile",
    "pointer",
    "Pointer",
    "unsafe_load",
    "unsafe_store",
    "vload",
    "vstore",
    "cuprintln",
    # other processes: a kernel over the chunks of a dask array
    "map_blocks",
    "map_overlap",
    # introspection and errors
    "stats",
    "explain",
    "invalidation_log",
    "invalidation_tree",
    "current_world",
    "code_ptx",
    "code_llvm",
    "code_native",
    "code_sass",
    "code_typed",
    "CompileError",
]
