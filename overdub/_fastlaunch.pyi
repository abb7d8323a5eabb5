"""Types of the native launch path (``_fastlaunch.c``): the C launch function and ``od.cuda``'s lookup."""

from collections.abc import Callable, Sequence
from types import ModuleType

from overdub.compiler import Kernel
from overdub.runtime import Launch

MAX_SLOTS: int  # the native launcher's parameter buffer, in 8-byte slots
SCALAR_CODES: dict[str, int]  # each scalar struct code the native path converts, and its width in bytes
SPEC_FIELDS: dict[str, tuple[str, ...]]  # each argument kind's letter, and the fields of its spec record
OPTIONS: tuple[str, ...]  # the keywords of od.cuda the native lookup serves, in its order
CONFIG_OPTIONS: int  # how many of OPTIONS, from the first, are fields of a LaunchConfig

class Launcher:
    """A native launch function: guards every argument, marshals it and calls ``cuLaunchKernel``."""

    def __init__(
        self,
        kernel: Kernel,
        checks: object,
        specs: Sequence[object],  # overdub.targets.cuda.abi's spec records
        kernel_handle: int,
        # cuLaunchKernel, cuCtxGetCurrent, cuKernelGetFunction, cuStreamGetCtx, cuCtxPushCurrent, cuCtxPopCurrent,
        # cuCtxGetId (0: none)
        driver_entries: tuple[int, int, int, int, int, int, int],
        stream_handle: Callable[[object], int],
        /,
    ) -> None: ...
    @property
    def kernel(self) -> Kernel: ...
    @property
    def guarded(self) -> bool: ...
    @property
    def nslots(self) -> int: ...
    def __call__(
        self, args: tuple[object, ...], blocks: object, threads: object, shmem: int, stream: object, /
    ) -> bool: ...

class Namespace(ModuleType):
    """A module whose call is od.cuda's launch (the base of ``overdub.cuda``'s class)."""

    def __call__(self, kernel: Callable[..., None], /, *args: object, **options: object) -> None: ...

class Configured:
    """``kernel[blocks, threads]``'s launch with its configuration held: the native lookup, else ``configured(*args)``."""

    def __init__(
        self,
        configured: Callable[..., None],
        function: Callable[..., None],
        config: object,  # a LaunchConfig: its fields read by name
        target: object,
        context: object,
        /,
    ) -> None: ...
    @property
    def configured(self) -> Callable[..., None]: ...
    def __call__(self, *args: object) -> None: ...

def cuda(
    kernel: Callable[..., None],
    /,
    *args: object,
    blocks: object = 1,
    threads: object = 1,
    shmem: int = 0,
    stream: object = None,
    target: object = None,
    context: object = None,
    state: object = None,
    debug: bool | None = None,
) -> None: ...
def install(
    table: dict[tuple[object, ...], list[Launch]],
    slow_path: Callable[..., None],
    python_launch: Callable[..., None],
    state_mark: object,
    version_address: int,  # the table's version tag (bindings.version_tag_address); 0: no lookup cache
    node_type: type,  # world.Node, whose instances keep their valid flag at valid_offset (0: unknown)
    valid_offset: int,
    /,
) -> None: ...
def launch_key(
    kernel: object, args: tuple[object, ...], context: object, target: object, state: object, /
) -> tuple[object, ...]: ...
def launch_count() -> int: ...
def words_fresh(words: bytes | None, /) -> bool: ...
def plan_key(ndarray: type, args: tuple[object, ...], /) -> tuple[object, ...] | None: ...
def set_capturing(thread: int, /) -> None: ...
def graph_launch(launch_functions: tuple[Launcher, ...], exec: int, stream: int, address: int, /) -> bool: ...
def set_array_layout(
    array_class: type | None,
    pointer_class: type | None,
    offsets: tuple[int, int, int, int, int, int, int],  # dtype, c_contiguous, f_contiguous, shape, strides, data, ptr
    /,
) -> None: ...
def set_scalar_layouts(layouts: list[tuple[type, str, int]], /) -> None: ...
def set_numpy_layout(
    array_class: type,
    probes: list[tuple[object, ...]],
    /,  # (array, data, shape, strides, dtype, flags)
) -> bool: ...
def cpu_launcher(
    kernel: Kernel,
    checks: object,
    specs: Sequence[object],  # overdub.targets.nativespecs' and overdub.targets.cpu.native's spec records
    offsets: tuple[int, ...],  # each argument's place in the launch tuple
    grid: tuple[int, int, int, int],  # the runner's od_run, the grid body, the runner's mode, a fiber's stack
    policy: object,  # overdub.targets.cpu.workers.Workers
    target: object,  # its `workers`
    raise_error: Callable[[Kernel], object],
    stream_check: Callable[[object], object],
    flush: bool,
    every_worker: bool,
    /,
) -> Launcher: ...
