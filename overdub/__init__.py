"""overdub: GPU kernels in Python with Julia's semantics.

Device functions are generic functions with multiple dispatch; kernels compile in a context that can
substitute any call; a compiled kernel keeps the edges it consulted, so redefining anything it used makes
the next launch recompile.
"""
from .registry import AmbiguityError, GenericFunction, Method, MethodError, function, methods, which
from .types import (Any, Array, Boolean, Complex, Float, Integer, Number, Ptr, PtrType, bool_, complex64,
                    complex128, float16, float32, float64, int8, int16, int32, int64, issubtype, uint8, uint16,
                    uint32, uint64)
from .world import current_world, invalidation_log

__version__ = "0.1.0"
