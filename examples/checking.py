"""A checking and profiling context, as a library on top of overdub: nothing in the user's kernel changes.

* :data:`checked` overdubs ``operator.getitem`` and ``operator.setitem`` for arrays, so every ``a[i]`` and
  ``a[i] = v`` of a kernel launched in it (and of everything the kernel calls) is bounds-checked on the device.
  The first thread out of range records its index, the array's extent and its position in the context's
  state; the access itself is skipped (a load gives element 0), and :func:`run_checked` raises an IndexError
  naming the index, the extent, the thread and the block after the launch.
* :func:`profile` counts, on the device, how many times each given function is called by a kernel: a
  prehook per function adds one to its counter in the context's state, with an atomic add.

Both work on both targets: the state is an int64 array on the launch's device.
"""

import operator

import numpy as np
from numba import cuda
from numba.core import types as numba_types

import overdub as od

__all__ = ["checked", "run_checked", "profiled", "profile"]

_RECORD = 10  # [flag, index, extent, axis, thread x, y, z, block x, y, z]

checked = od.Context("checked", state=od.Array[od.int64, 1])


def _zeros(n: int, target: str | None):
    if (target or od.default_target()) == "cuda":
        import cupy

        return cupy.zeros(n, dtype=np.int64)
    return np.zeros(n, dtype=np.int64)


def _on_host(array) -> np.ndarray:
    return array.get() if hasattr(array, "get") else array


# --- bounds checks ----------------------------------------------------------------------------------------


@od.function
def _inside(index, extent) -> bool:
    return -extent <= index < extent  # Python's negative indices count from the end


@od.function
def _report(index, extent, axis):
    """Record the first out-of-range access of the launch (later ones lose the compare-and-swap)."""
    record = od.state()
    if cuda.atomic.cas(record, 0, 0, 1) == 0:
        record[1], record[2], record[3] = index, extent, axis
        record[4], record[5], record[6] = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
        record[7], record[8], record[9] = cuda.blockIdx.x, cuda.blockIdx.y, cuda.blockIdx.z


@checked.overdub(operator.getitem)
def _load(a: od.Array, i: od.Integer):
    if not _inside(i, a.shape[0]):
        _report(i, a.shape[0], 0)
        return a[0]
    return a[i]


@checked.overdub(operator.setitem)
def _store(a: od.Array, i: od.Integer, value):
    if not _inside(i, a.shape[0]):
        _report(i, a.shape[0], 0)
        return
    a[i] = value


@od.function
def _index_ok(a, index) -> bool:
    for axis in range(len(index)):
        if not _inside(index[axis], a.shape[axis]):
            _report(index[axis], a.shape[axis], axis)
            return False
    return True


def _tuple_overdubs(ndim: int) -> None:
    index_type = numba_types.UniTuple(numba_types.int64, ndim)

    @checked.overdub(operator.getitem)
    def _load_nd(a: od.Array, index: index_type):
        return a[index] if _index_ok(a, index) else a.ravel()[0]

    @checked.overdub(operator.setitem)
    def _store_nd(a: od.Array, index: index_type, value):
        if _index_ok(a, index):
            a[index] = value


for _ndim in (2, 3):
    _tuple_overdubs(_ndim)


def run_checked(kernel, *args, blocks=1, threads=1, target: str | None = None, **launch):
    """Launch ``kernel`` with every array access checked; raise IndexError for the first one out of range."""
    record = _zeros(_RECORD, target)
    od.cuda(kernel, *args, blocks=blocks, threads=threads, target=target, context=checked, state=record, **launch)
    od.synchronize(target)
    flag, index, extent, axis, *position = (int(v) for v in _on_host(record))
    if flag:
        raise IndexError(
            f"index {index} is out of bounds for axis {axis} with size {extent}, in thread "
            f"{tuple(position[:3])} of block {tuple(position[3:])} of kernel "
            f"{getattr(kernel, '__qualname__', kernel)}"
        )


# --- call counts ------------------------------------------------------------------------------------------

profiled = od.Context("profiled", state=od.Array[od.int64, 1])
_counters: dict = {}  # function -> its counter's index in the state


def _counter(function) -> int:
    """The counter of ``function``, adding a prehook that counts its calls the first time it is asked."""
    slot = _counters.get(function)
    if slot is None:
        slot = _counters[function] = len(_counters)

        @profiled.prehook(function)
        def count(*args):
            cuda.atomic.add(od.state(), slot, 1)

    return slot


def profile(kernel, *args, functions=(), blocks=1, threads=1, target: str | None = None, **launch) -> dict:
    """Launch ``kernel`` and return how many times it called each of ``functions`` (counted on the device)."""
    slots = {function: _counter(function) for function in functions}
    counts = _zeros(max(len(_counters), 1), target)
    od.cuda(kernel, *args, blocks=blocks, threads=threads, target=target, context=profiled, state=counts, **launch)
    od.synchronize(target)
    host = _on_host(counts)
    return {getattr(f, "__name__", repr(f)): int(host[slot]) for f, slot in slots.items()}
