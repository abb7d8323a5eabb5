"""Arrays in a target's memory: ``od.struct_array``, an array of struct values where a target's kernels read
them (numpy's for the CPU target, cupy's for CUDA: the target's ``zeros``)."""

from __future__ import annotations

import typing
from collections.abc import Sequence

from .structs import struct_dtype
from .targets import get_target

__all__ = ["struct_array"]


def struct_array(
    cls: object, shape: typing.SupportsIndex | Sequence[typing.SupportsIndex], target: str | None = None
) -> typing.Any:  # a numpy array, or a cupy array (cupy is untyped)
    """A zeroed array of ``shape`` values of the struct ``cls`` in the memory of ``target`` (None: the default
    target): numpy for the CPU target, cupy for CUDA. Any numpy or cupy array of ``cls.dtype`` serves as well."""
    dtype = struct_dtype(cls)
    return get_target(target).zeros(shape, dtype)
