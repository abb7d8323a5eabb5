"""A compiled CUDA kernel and how it is launched (:class:`CUDALauncher`).

A launch does only what it must: check the guards, marshal each argument into the kernel's parameter slots
(how, the CUDA parameter ABI says for each argument kind: :mod:`.abi`) and call the driver's ``cuLaunchKernel``. Where the native
extension is built and has a table entry for every argument's kind, all of it runs in C (``_fastlaunch.c``);
otherwise a generated Python launch function packs every slot with one ``struct.pack_into``.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, SupportsInt

from .. import launchfn
from . import abi, arraylayout

try:
    from ... import _fastlaunch
except ImportError:  # built without a C compiler: the generated Python launch path serves
    _fastlaunch = None  # type: ignore[assignment]  # None: _native checks for it
else:
    _fastlaunch.set_scalar_layouts(arraylayout.scalar_layouts())

from ...launchconfig import stream_handle
from .driver import context_of_stream, driver, in_context_now, launch_error, make_current, toolkit

if TYPE_CHECKING:
    from ...arguments import Argument
    from ...compiler import Kernel
    from .. import LaunchFunction

# --- launcher -------------------------------------------------------------------------------------------


class CUDALauncher:
    """A compiled kernel (loaded on first launch) and how it is launched."""

    def __init__(
        self,
        library: Any,
        argtypes: Iterable[object],
        call_helper: Any = None,
        type_annotation: object = None,
        carveout: int | None = None,
    ) -> None:
        self.library, self.carveout = library, carveout  # carveout: the shared memory share it prefers (percent)
        self.type_annotation = type_annotation  # the typed IR, annotated on the source (inspect_types)
        self.call_helper = call_helper  # debug kernels: what the error codes threads record mean
        self.argtypes = tuple(argtypes)
        self.handle: Any = None  # the CUkernel, loaded on first launch: every context's
        self._functions: dict[tuple[int, int], object] = {}  # (context, its ID) -> the kernel's CUfunction there
        self.lock = threading.Lock()
        # a kernel that synchronizes its grid (cuda.cg.this_grid().sync()) needs a cooperative launch
        self.cooperative = bool(getattr(library, "use_cooperative", False))
        self._co_resident: dict[tuple[int, int], int] = {}

    def _kernel(self) -> Any:
        with self.lock:
            if self.handle is None:
                with toolkit():
                    handle = driver().kernel(self.library)
                if self.carveout is not None:
                    driver().prefer_carveout(handle, self.carveout)
                self.handle = handle
        return self.handle

    def _function(self) -> object | None:
        """The kernel's CUfunction in the context current on this thread, or None where the driver cannot load
        it there (a device of another architecture than the code's). The native launch function keeps its own
        per-context table, in C."""
        drv = driver()
        context = drv.current_context()
        function = self._functions.get(context) if context[0] else None
        if function is None:
            function = drv.function(self._kernel())  # makes a context current where none is
            if function is not None:
                self._functions[drv.current_context()] = function
        return function

    def launch_function(self, kernel: Kernel, described: tuple[Argument, ...]) -> LaunchFunction:
        slots = [abi.slots_of(argument) for argument in described]
        if self.cooperative or self.call_helper is not None:
            return self._generated(kernel, described, slots)
        return self._native(kernel, described, slots) or self._generated(kernel, described, slots)

    def _native(
        self, kernel: Kernel, described: tuple[Argument, ...], slots: list[tuple[abi.Slot, ...]]
    ) -> LaunchFunction | None:
        """The C launch function, where the extension is built, every argument's kind has a native spec and
        the kernel's parameter slots fit its buffer."""
        if _fastlaunch is None or sum(map(len, slots)) > abi.MAX_SLOTS:
            return None
        specs = abi.native_specs(described, slots)
        checks = kernel.guard.native_checks()
        if specs is None or checks is None:
            return None
        if any(isinstance(spec, abi.ArraySpec) for spec in specs):
            arraylayout.install(_fastlaunch)
        return _fastlaunch.Launcher(kernel, checks, specs, int(self._kernel()), driver().native_entries, stream_handle)

    @staticmethod
    def _packing(slots: Sequence[tuple[abi.Slot, ...]]) -> tuple[dict[str, object], list[str], struct.Struct]:
        """How the parameter slots are written: the helpers' namespace, one Python expression per slot (of the
        argument variables a0, a1, ...), and the buffer's layout."""
        namespace: dict[str, object] = {}
        values: list[str] = []
        for name, arg_slots in zip(launchfn.argument_names(len(slots)), slots):
            values += abi.slot_values(arg_slots, name, namespace)
        return namespace, values, struct.Struct(abi.slot_format([slot for each in slots for slot in each]))

    @staticmethod
    def _buffer(layout: struct.Struct) -> tuple[ctypes.Array[ctypes.c_char], ctypes.Array[ctypes.c_void_p]]:
        """A parameter buffer of ``layout`` and the array of pointers to its 8-byte slots the driver takes."""
        buffer = ctypes.create_string_buffer(max(layout.size, 8))
        base = ctypes.addressof(buffer)
        addresses = (ctypes.c_void_p * max(layout.size // 8, 1))(*[base + 8 * i for i in range(layout.size // 8)])
        return buffer, addresses

    def parameters(
        self, described: Sequence[Argument]
    ) -> tuple[ctypes.Array[ctypes.c_char], ctypes.Array[ctypes.c_void_p]]:
        """The kernel's parameters for the ``described`` arguments' values, as a launch passes them: the buffer
        and the array of pointers to its slots (a graph's kernel node takes them: ``od.graph``'s update)."""
        slots = [abi.slots_of(argument) for argument in described]
        namespace, values, layout = self._packing(slots)
        names = launchfn.argument_names(len(slots))
        pack = eval(f"lambda {', '.join(names)}: ({', '.join(values)}{',' if values else ''})", namespace)
        buffer, addresses = self._buffer(layout)
        layout.pack_into(buffer, 0, *pack(*(argument.value for argument in described)))
        return buffer, addresses

    def _generated(
        self, kernel: Kernel, described: tuple[Argument, ...], slots: list[tuple[abi.Slot, ...]]
    ) -> LaunchFunction:
        """The Python launch function: one ``struct.pack_into`` writes every slot of one parameter buffer
        (per launcher, under its lock: the driver copies it during the call)."""
        namespace, values, layout = self._packing(slots)
        buffer, addresses = self._buffer(layout)
        enqueue = (
            "drv.launch_cooperative(function, gx, gy, gz, tx, ty, tz, shmem, hstream, slot_addresses)"
            if self.cooperative
            else "drv.launch_kernel(function, gx, gy, gz, tx, ty, tz, shmem, hstream, slot_addresses, 0)"
        )
        body = [
            "hstream = drv.null_stream if stream is None else drv.stream(stream)",
            "function = function_here()",
            "if function is None:",  # not loadable in this context (another architecture): the slow path
            "    return False",
        ]
        if self.cooperative:
            body += ["check_co_resident(gx * gy * gz, tx * ty * tz, shmem)"]
        checked = self.call_helper is not None
        body += [
            "with lock:",
            f"    pack_into(buffer, 0{', ' if values else ''}{', '.join(values)})",
            *(["    clear_error()"] if checked else []),
            f"    err, = {enqueue}",
            "    if err and in_context_now(err):",
            f"        err, = {enqueue}",
            "    if err:",
            "        return launch_failed(err, hstream)",
            *(["    raise_error(hstream)"] if checked else []),
        ]
        namespace |= {
            "drv": driver(),
            "lock": self.lock,
            "pack_into": layout.pack_into,
            "buffer": buffer,
            "slots": addresses,  # kept alive by the launch function
            "slot_addresses": ctypes.addressof(addresses),
            "function_here": self._function,
            "launch_failed": self._failed,
            "in_context_now": in_context_now,
            "check_co_resident": self._check_co_resident,
            "clear_error": self._clear_error,
            "raise_error": self._raise_error,
        }
        return launchfn.generate(kernel, described, body, namespace, body_reads_stream=True)

    def suggested_block_size(self, shmem: int = 0) -> int:
        """The driver's occupancy-optimal block size for this kernel."""
        return driver().potential_block_size(self._function(), shmem)

    def resources(self) -> dict[str, int]:
        """What the kernel's code uses of the current device and the most threads a block may have."""
        return driver().attributes(self._function())

    def co_resident_blocks(self, threads: int, shmem: int = 0) -> int:
        """How many blocks of ``threads`` threads (and ``shmem`` bytes of dynamic shared memory) the current
        device holds at once: the most a cooperative launch may have (the driver's occupancy)."""
        limit = self._co_resident.get((threads, shmem))
        if limit is None:
            limit = self._co_resident[(threads, shmem)] = driver().co_resident_blocks(self._function(), threads, shmem)
        return limit

    def _check_co_resident(self, blocks: int, threads: int, shmem: int) -> None:
        """A cooperative grid must be resident all at once, as numba-cuda requires: say so before launching."""
        limit = self.co_resident_blocks(threads, shmem)
        if blocks > limit:
            raise ValueError(
                f"the kernel synchronizes its whole grid (cuda.cg.this_grid().sync()), so every block "
                f"must be resident at once: this GPU holds at most {limit} blocks of {threads} threads"
                f"{f' with {shmem} bytes of shared memory' if shmem else ''}, not {blocks}; launch "
                f"fewer blocks (a grid-stride loop covers any size)"
            )

    # -- debug kernels: numba-cuda's protocol (a thread that raises stores an error code, its thread and block
    # in globals of the module named after the kernel; the host reads them after the launch)
    def _error_global(self, name: str) -> Any:
        function = self.library.get_cufunc()
        return function.module.get_global_symbol(f"{function.name}__{name}__")[0]

    def _read_error_global(self, name: str) -> int:
        from numba.cuda.cudadrv import driver as numba_driver

        value = ctypes.c_int()
        numba_driver.device_to_host(  # type: ignore[no-untyped-call]  # numba's is unannotated
            ctypes.addressof(value), self._error_global(name), ctypes.sizeof(value)
        )
        return value.value

    def _clear_error(self) -> None:
        make_current()  # a debug kernel's launch reads and writes its globals through the driver
        self._error_global("errcode").memset(0)

    def _raise_error(self, hstream: object) -> None:
        """After a debug kernel's launch (waiting for it): raise what a thread of it raised, if one did."""
        (err,) = driver().driver.cuStreamSynchronize(hstream)
        if err:
            self._failed(err)
        code = self._read_error_global("errcode")
        if code == 0:
            return
        thread = [self._read_error_global("tid" + axis) for axis in "xyz"]
        block = [self._read_error_global("ctaid" + axis) for axis in "xyz"]
        exc_class, exc_args, loc = self.call_helper.get_exception(code)
        # numba-cuda's message, which its programs match: where in the source, which thread, then the user's
        where = f"In function {loc[0]!r}, file {os.path.abspath(loc[1])}, line {loc[2]}, " if loc else ""
        prefix = f"{where}tid={thread} ctaid={block}"
        raise exc_class(*((f"{prefix}: {exc_args[0]}", *exc_args[1:]) if exc_args else (prefix,)))

    def _failed(self, err: object, hstream: SupportsInt | None = None) -> bool:
        """After the driver refused a launch: False where the stream is another context's (the slow path
        launches in the stream's context), else the driver's error."""
        if context_of_stream(hstream) is not None:
            return False
        raise launch_error(f"launching {self.library.name}: {err!r}")
