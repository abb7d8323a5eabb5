"""The scenario overdub exists for: redefine a device function, and the next launch runs the new one.

Runs on the GPU when one is usable (arrays from cupy), else on the CPU target (numpy arrays).
"""

import numpy as np

import overdub as od

if od.default_target() == "cuda":
    import cupy as xp
else:
    xp = np

arr = xp.zeros(1, dtype=np.int64)


@od.function
def doit(ptr):
    od.unsafe_store(ptr, 0)
    print(1)  # in a kernel, print is cuprintln


def kernel(ptr):
    doit(ptr)


od.cuda(kernel, od.pointer(arr))  # prints 1


@od.function
def doit(ptr):  # noqa: F811 -- redefinition: same generic function, method replaced
    od.unsafe_store(ptr, 0)
    print(2)


od.cuda(kernel, od.pointer(arr))  # prints 2: recompiled, nothing stale
od.synchronize()
