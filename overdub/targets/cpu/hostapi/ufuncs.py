"""``cuda.vectorize`` and ``cuda.guvectorize`` on the CPU target: numba's CPU ufuncs, taking numba-cuda's calls.

numba-cuda compiles the element function into a CUDA kernel and runs it over device arrays (copying host arrays
to the GPU and back). On the CPU target device arrays are host arrays, so the same function compiled by numba's
CPU target as a numpy ufunc (or generalized ufunc) computes the same elements; the object returned also takes
numba-cuda's ``stream=`` keyword and its ``reduce(arr, stream=0)``. A device array in gives a device array out,
a host array a host array, as numba-cuda's does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

_numba_vectorize: Any = numba.vectorize  # numba's decorators are untyped
_numba_guvectorize: Any = numba.guvectorize

__all__ = ["vectorize", "guvectorize"]


class HostUfunc:
    """A CUDA ufunc of numba-cuda's (``@cuda.vectorize``) on the CPU target: numba's CPU ufunc ``ufunc``."""

    def __init__(self, ufunc: Any):
        self.ufunc = ufunc
        self.__name__ = getattr(ufunc, "__name__", "ufunc")
        self.__doc__ = getattr(ufunc, "__doc__", None)

    def __call__(self, *args: Any, stream: object = 0, **kws: Any) -> Any:
        return self.ufunc(*args, **kws)

    def reduce(self, arr: Any, stream: object = 0) -> Any:
        """The ufunc's reduction over the first axis (numba-cuda's ``reduce``)."""
        return self.ufunc.reduce(arr)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ufunc, name)

    def __repr__(self) -> str:
        return f"<overdub.cuda ufunc {self.__name__} (CPU target)>"


def vectorize(ftylist_or_function: Any = (), target: str = "cuda", **kws: Any) -> Any:
    """numba-cuda's ``vectorize``: ``@cuda.vectorize(["float32(float32)"])`` or ``@cuda.vectorize`` on a
    function, compiled by numba as a CPU ufunc."""
    if callable(ftylist_or_function):
        return HostUfunc(_numba_vectorize(**kws)(ftylist_or_function))

    def decorate(function: Callable[..., Any]) -> HostUfunc:
        return HostUfunc(_numba_vectorize(ftylist_or_function, **kws)(function))

    return decorate


def guvectorize(ftylist: Any, signature: str, target: str = "cuda", **kws: Any) -> Callable[..., HostUfunc]:
    """numba-cuda's ``guvectorize``: ``@cuda.guvectorize(["void(float32[:], float32[:])"], "(n)->(n)")``,
    compiled by numba as a CPU generalized ufunc."""

    def decorate(function: Callable[..., Any]) -> HostUfunc:
        return HostUfunc(_numba_guvectorize(ftylist, signature, **kws)(function))

    return decorate
