"""Generic functions, a context and kernels at the top level of an importable module (for tests/test_pickling.py,
whose spawned workers import this module by name)."""

import numpy as np

import overdub as od


@od.function
def scale(x: od.Integer):
    return 2 * x


@od.function
def scale(x: od.Float):  # noqa: F811  (a second method of the same generic function)
    return 0.5 * x


doubling = od.Context("doubling")


@doubling.overdub(scale)
def _(x: od.Integer):
    return 4 * x


def kernel(out, x):
    out[0] = scale(x)


def launch_in_worker(x):
    """Run in a worker: launch the kernel (on the CPU target) and return what it wrote."""
    out = np.zeros(1)
    od.cuda(kernel, out, x, target="cpu")
    return float(out[0])
