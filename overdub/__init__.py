"""overdub: GPU kernels in Python with Julia's semantics.

Device functions are generic functions with multiple dispatch; kernels compile in a context that can
substitute any call; a compiled kernel keeps the edges it consulted, so redefining anything it used makes
the next launch recompile.
"""

import importlib
import typing
from typing import TYPE_CHECKING

from numba import config as _numba_config

from . import context as _context
from . import postimport as _postimport
from . import registry as _registry
from . import travel as _travel  # its origins only: a forked child knows its parent's objects
from .context import Context, when_imported
from .extending import method
from .registry import AmbiguityError, GenericFunction, Method, MethodError, function, methods, which
from .structs import struct
from .types import AbstractType, PtrType, issubtype
from .world import current_world, invalidation_log

if _numba_config.ENABLE_CUDASIM:  # type: ignore[attr-defined]  # (numba's config module sets it at import)
    from . import targets  # noqa: F401  (raises the ImportError saying overdub does not run under the simulator)

if TYPE_CHECKING:  # names imported at their first use (``__getattr__`` below): ``import overdub`` leaves them out
    from .dropin import jit
    from .graphs import Graph, graph
    from .host import overdub
    from .intrinsics import Pointer, cuprintln, pointer, state, unsafe_load, unsafe_store, vload, vstore
    from .job import CompileError
    from .launch import default_target, synchronize
    from .memory import struct_array
    from .precompiling import precompile
    from .reflect import code_llvm, code_native, code_ptx, code_sass, code_typed, explain, invalidation_tree, stats
    from .scaleout import map_blocks, map_overlap
    from .targets.registry import ALL, CPU, CUDA

if TYPE_CHECKING:  # od.cuda: the launch's signature and numba-cuda's names (a module whose call is the launch)
    from .cuda import CudaNamespace

    cuda: CudaNamespace

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

# The public names whose modules ``import overdub`` leaves out until a program first reads one (PEP 562): what
# defining generic functions, methods, structs and contexts needs is imported with overdub; the drop-in, the
# launch, the targets, the compile pipeline, reflection, graphs, precompile and the Dask scale-out load at
# their first use (a definition costs no compiler; the first launch or reflection pays for it).
_DEFERRED = {
    "cuda": ("cuda", None),
    "jit": ("dropin", "jit"),
    "CompileError": ("job", "CompileError"),
    "overdub": ("host", "overdub"),
    "default_target": ("launch", "default_target"),
    "synchronize": ("launch", "synchronize"),
    "struct_array": ("memory", "struct_array"),
    "graph": ("graphs", "graph"),
    "Graph": ("graphs", "Graph"),
    "precompile": ("precompiling", "precompile"),
    "map_blocks": ("scaleout", "map_blocks"),
    "map_overlap": ("scaleout", "map_overlap"),
    **{name: ("targets.registry", name) for name in ("CPU", "CUDA", "ALL")},
    **{
        name: ("intrinsics", name)
        for name in ("Pointer", "cuprintln", "pointer", "state", "unsafe_load", "unsafe_store", "vload", "vstore")
    },
    **{
        name: ("reflect", name)
        for name in (
            "code_llvm",
            "code_native",
            "code_ptx",
            "code_sass",
            "code_typed",
            "explain",
            "invalidation_tree",
            "stats",
        )
    },
}


if not TYPE_CHECKING:  # a type checker reads the deferred names' imports above, and no attribute beyond them

    def __getattr__(name: str) -> object:
        where = _DEFERRED.get(name)
        if where is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module = importlib.import_module(f"{__name__}.{where[0]}")
        value = module if where[1] is None else getattr(module, where[1])
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_DEFERRED})


# What the deferred modules install where the modules imported here look for it, installed at first need:
# overdub.travel's pickling of generic functions and contexts, overdub.reflect's inspection of a generic
# function's code; and overdub.engines, whose hooks in the picklers of multiprocessing, concurrent.futures,
# Dask, joblib and Ray ship the user's code (overdub.travel), imported with the first of their modules (each
# hook installed as its module is imported: now, or after its code where it is importing).


def _reduce_generic(gf: GenericFunction) -> tuple[object, ...]:
    _travel.load()  # installs registry.reduce_generic
    return _registry.reduce_generic(gf)  # type: ignore[misc]  # set now


def _reduce_context(ctx: Context) -> tuple[object, ...] | None:
    _travel.load()  # installs context.reduce_context
    reduced: tuple[object, ...] | None = _context.reduce_context(ctx)  # type: ignore[misc]  # set now
    return reduced


def _inspect_device(gf: GenericFunction, signature: tuple[object, ...], kind: str, cc: typing.Any) -> object:
    from . import reflect  # installs registry.inspect_device

    return reflect.device_code(gf, signature, kind, cc)


def _engines_hooked(module: object) -> None:
    from . import engines  # noqa: F401  (it installs each engine's hook as its module is imported)


if _registry.reduce_generic is None:
    _registry.reduce_generic = _reduce_generic
if _context.reduce_context is None:
    _context.reduce_context = _reduce_context  # type: ignore[assignment]
if _registry.inspect_device is None:
    _registry.inspect_device = _inspect_device

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
for _name in _postimport.ENGINE_MODULES:
    _postimport.when_imported(_name, _engines_hooked)
