"""Kernels over chunked arrays: ``od.map_blocks`` and ``od.map_overlap`` run an overdub kernel on each chunk
of a ``dask.array`` -- numpy chunks on the CPU target, cupy chunks on the CUDA target.

The kernel takes the output chunk first, then the input chunks (the same shape as the output: the
dask arrays are aligned chunk by chunk), then any scalar arguments: ``kernel(out, a, b, alpha)``, with one
thread per element of ``out`` on a grid of ``out.ndim`` dimensions (``cuda.grid(out.ndim)``). Each task
holds the kernel as :class:`overdub.travel.shipped.Shipped`: the worker runs the definitions the client has when the
graph is built, and compiles each once (a task's own work is the launch).
"""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable, Sequence
from typing import cast

from . import launch
from .context import Context
from .targets import get_target
from .targets.registry import holding
from .travel import load
from .travel.shipped import Shipped

__all__ = ["map_blocks", "map_overlap"]

load()  # what ships code to other processes, its reducers of generic functions, contexts and struct classes

_THREADS: dict[int, typing.Any] = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}


def _run_chunk(
    shipped: Shipped,
    dtype: object,
    target: str | None,
    context: Context | None,
    scalars: tuple[object, ...],
    *chunks: object,
) -> object:
    first = chunks[0]
    chosen = target or holding(first).name  # by default, where the chunks are
    out = get_target(chosen).empty(first.shape, dtype or first.dtype)  # type: ignore[attr-defined]
    if out.size:
        threads = _THREADS[max(out.ndim, 1)] if out.ndim <= 3 else None
        if threads is None:
            raise ValueError(f"od.map_blocks: chunks of {out.ndim} dimensions (a kernel's grid has at most 3)")
        shape = out.shape or (1,)
        grid = tuple(math.ceil(n / t) for n, t in zip(shape, threads))
        kernel = cast("Callable[..., None]", shipped.kernel)
        launch.cuda(kernel, out, *chunks, *scalars, blocks=grid, threads=threads, target=chosen, context=context)
    return out


def _meta(array: object, dtype: object) -> object:
    meta = getattr(array, "_meta", None)
    return None if meta is None else meta.astype(dtype or meta.dtype)


def map_blocks(
    kernel: object,
    *arrays: object,
    args: Sequence[object] = (),
    dtype: object = None,
    target: str | None = None,
    context: Context | None = None,
) -> object:
    """A dask array whose each chunk is ``kernel(out, *chunks, *args)`` run over the chunks of ``arrays``
    (aligned: same shape and chunks); ``dtype``: the output's (default the first array's); ``target``: the
    default is the chunks' (cupy: CUDA, numpy: CPU)."""
    import dask.array as da

    run = functools.partial(_run_chunk, Shipped(kernel), dtype, target, context, tuple(args))
    first = arrays[0]
    dtype = dtype or getattr(first, "dtype", None)
    return da.map_blocks(run, *arrays, dtype=dtype, meta=_meta(first, dtype))  # type: ignore[no-untyped-call]


def map_overlap(
    kernel: object,
    *arrays: object,
    depth: object,
    boundary: object = "reflect",
    args: Sequence[object] = (),
    dtype: object = None,
    target: str | None = None,
    context: Context | None = None,
) -> object:
    """As :func:`map_blocks` for a stencil: each chunk comes with ``depth`` cells of its neighbours (dask's
    ``map_overlap``; ``boundary`` as dask takes it), the kernel writes every cell of ``out`` (halo included),
    and the halo is trimmed off the result."""
    import dask.array as da

    run = functools.partial(_run_chunk, Shipped(kernel), dtype, target, context, tuple(args))
    first = arrays[0]
    dtype = dtype or getattr(first, "dtype", None)
    return da.map_overlap(  # type: ignore[no-untyped-call]
        run, *arrays, depth=depth, boundary=boundary, dtype=dtype, meta=_meta(first, dtype)
    )
