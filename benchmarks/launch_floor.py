"""The C floor of part 1: what a launch costs the host when C calls ``cuLaunchKernel`` in a tight loop.

``launch_floor.c`` is built with the system's C compiler (``$CC``, else ``cc``) into a temporary directory when
the part runs, and loaded with ctypes. It needs no CUDA headers and no GPU to build (``compile_check`` builds it
on any machine); to launch, it finds ``cuLaunchKernel`` in ``libcuda.so.1``. Python gives it a ``CUfunction``
and the kernel's parameters packed once, so a launch there is the driver call alone.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("launch_floor.c")


def compiler() -> str | None:
    """The C compiler to build with: ``$CC``, else ``cc`` on the PATH, else None."""
    return os.environ.get("CC") or shutil.which("cc")


def build(directory: Path) -> Path:
    """Compile ``launch_floor.c`` into a shared library in ``directory`` and return its path. Raises
    FileNotFoundError without a C compiler, RuntimeError (with the compiler's output) when it fails."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("no C compiler ($CC or cc) to build benchmarks/launch_floor.c")
    library = directory / "launch_floor.so"
    command = [cc, "-O2", "-shared", "-fPIC", "-o", str(library), str(SOURCE), "-ldl"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()}")
    return library


def load(library: Path) -> ctypes.CDLL:
    """The built library, its two functions typed (nothing is called: this needs no driver)."""
    lib = ctypes.CDLL(str(library))
    lib.floor_init.argtypes, lib.floor_init.restype = [], ctypes.c_int
    lib.floor_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    lib.floor_launch.restype = ctypes.c_int
    return lib


class Floor:
    """The library, loaded and bound to the driver's ``cuLaunchKernel``."""

    def __init__(self, library: Path):
        self.lib = load(library)
        status = self.lib.floor_init()
        if status != 0:
            raise OSError({-1: "libcuda.so.1 did not load", -2: "libcuda.so.1 has no cuLaunchKernel"}[status])

    def loop(self, function: int, params: list[bytes]):
        """A function of n doing n launches of ``function`` (a ``CUfunction`` of the current context) in C,
        with ``params`` (each parameter's bytes, as the kernel takes it). The parameter buffer -- the bytes and
        the array of pointers to them the driver reads -- is made once, here."""
        buffers = [ctypes.create_string_buffer(p, len(p)) for p in params]
        pointers = (ctypes.c_void_p * len(buffers))(*(ctypes.addressof(b) for b in buffers)) if buffers else None

        def floor_loop(n, launch=self.lib.floor_launch, function=function, pointers=pointers, buffers=buffers):
            status = launch(function, pointers, n)  # buffers: kept alive as long as the loop
            if status != 0:
                raise RuntimeError(f"cuLaunchKernel returned CUresult {status}")

        return floor_loop
