"""The CPU target, a package: the target and its launchers (``target``), the grid bodies the native runner
calls (``grid``), the runner's interface (``runner``), the thread and block indices (``state``), barriers,
shared memory and warp operations (``sync``), ``cuda.atomic`` (``atomics``), the threads a bounds guard admits
(``guard``) and checked kernels (``checks``)."""

from .target import CUDA_IDIOM, TARGET, CPUGridError, CPUTarget, UnsupportedOnCPU

__all__ = ["TARGET", "CPUTarget", "CPUGridError", "UnsupportedOnCPU", "CUDA_IDIOM", "current_target"]


def current_target() -> CPUTarget:
    """The CPU target (its registry entry's): one device, one target."""
    return TARGET
