"""``cuda.reduce`` on the CPU target: one CPU-target kernel folds the elements with the binary function.

numba-cuda's ``Reduce`` compiles the function into a tree reduction on the GPU. Here the elements are in host
memory already, so one thread of a CPU-target kernel folds them in order, starting from ``init``: the same
result for an associative function (a float sum may differ in its last bits, as two GPUs' trees may). The
kernel calls the function as any kernel calls a callee, so redefining what the function calls is seen as
everywhere in overdub.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....launch import cuda as launch

__all__ = ["Reduce", "reduce"]


def _fold_kernel(functor: Callable[[Any, Any], Any]) -> Callable[..., None]:
    def fold(out: Any, values: Any, init: Any) -> None:
        result = init
        for i in range(values.size):
            result = functor(result, values[i])
        out[0] = result

    return fold


class Reduce:
    """A reduction by the binary function ``functor`` (``@cuda.reduce`` decorates one)."""

    def __init__(self, functor: Callable[[Any, Any], Any]):
        self._functor = functor
        self._kernel = _fold_kernel(functor)

    def __call__(self, arr: Any, size: int | None = None, res: Any = None, init: Any = 0, stream: object = 0) -> Any:
        """The reduction of ``arr`` (a 1-d host or device array; its first ``size`` elements), starting from
        ``init``; written to ``res[0]`` instead, when a device array ``res`` is given (and None returned)."""
        if arr.ndim != 1:
            raise TypeError("only support 1D array")
        values = np.asarray(arr)[:size] if size is not None else np.asarray(arr)
        init = values.dtype.type(init)
        if values.size == 0:
            result = init
        else:
            out = np.empty(1, values.dtype)
            launch(self._kernel, out, values, init, target="cpu")
            result = out[0]
        if res is None:
            return result
        res[0] = result
        return None

    def __repr__(self) -> str:
        return f"<overdub.cuda.reduce of {getattr(self._functor, '__qualname__', self._functor)!r} (CPU target)>"


reduce = Reduce
