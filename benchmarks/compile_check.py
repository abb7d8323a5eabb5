"""--compile-only: compile every GPU-part kernel to PTX without a GPU (overdub via od.code_ptx, numba-cuda via
cuda.compile_ptx, the CUDA C sources via NVRTC), build part 1's C floor with the system's C compiler, and check
part 4's recompile selectivity on PTX compiles.

This is what can be verified on a machine with no GPU; it also records how many ``call`` instructions each
overdub kernel's PTX keeps (a generic method that was not inlined would show up there).
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

import kernels as K
import launch_floor
from _common import Part, fresh_module

CC = (9, 0)


def _calls(ptx: str) -> int:
    return len(re.findall(r"^\s*call(\.uni)?\b", ptx, flags=re.M))


def _body_lines(ptx: str) -> int:
    """Instruction-ish lines of the PTX (no directives, labels, comments or braces)."""
    count = 0
    for line in ptx.splitlines():
        s = line.strip()
        if s and not s.startswith((".", "//", "$", "{", "}", "(", ")")) and s.endswith(";"):
            count += 1
    return count


def _nvrtc(source: str, name: str, arch: str = "sm_90") -> None:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcCreateProgram: {err}")
    (err,) = nvrtc.nvrtcCompileProgram(prog, 1, [f"--gpu-architecture={arch}".encode()])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"NVRTC failed for {name}: {log.decode(errors='replace')}")


def run(part: Part, quick: bool, check_only: bool = False) -> None:
    import numba
    from numba import cuda
    from numba.core import types

    import overdub as od

    f32 = types.float32
    arr1 = types.Array(f32, 1, "C")
    arr2 = types.Array(f32, 2, "C")
    part.config.update(cc=CC)

    def od_ptx(label, kernel, *argtypes, context=None):
        t0 = time.perf_counter()
        ptx = od.code_ptx(kernel, *argtypes, cc=CC, context=context)
        seconds = time.perf_counter() - t0
        part.measure(
            f"ptx {label} [overdub]", _body_lines(ptx), "lines", calls=_calls(ptx), compile_s=round(seconds, 3)
        )
        if ".entry" not in ptx:
            raise AssertionError(f"{label}: no .entry in the PTX")
        return ptx

    def nb_ptx(label, pyfunc, sig):
        t0 = time.perf_counter()
        ptx, _ = cuda.compile_ptx(pyfunc, sig, cc=CC)
        seconds = time.perf_counter() - t0
        part.measure(
            f"ptx {label} [numba-cuda]", _body_lines(ptx), "lines", calls=_calls(ptx), compile_s=round(seconds, 3)
        )
        return ptx

    # part 1
    with part.guard("part 1 kernels"):
        pymod = fresh_module("cc_launch", K.launch_py_source())
        particle = pymod.Particle
        # overdub takes a Particle value and an array of them; numba-cuda a numpy record and an array of those
        od_types = {"array": arr1, "scalar": f32, "struct": particle.__overdub_type__}
        od_types["records"] = types.Array(particle.__overdub_type__, 1, "C")
        nb_types = {**od_types, "struct": numba.from_dtype(particle.dtype)}
        nb_types["records"] = types.Array(nb_types["struct"], 1, "C")
        for name, kinds in K.LAUNCH_KERNELS.items():
            od_ptx(f"1 {name}", getattr(pymod, name), *(od_types[kind] for kind in kinds))
            nb_ptx(f"1 {name}", getattr(pymod, name), tuple(nb_types[kind] for kind in kinds))
        _nvrtc(K.launch_c_source(), "launch")
        _nvrtc(K.SPIN_C, "spin")
        part.checks.append({"name": "part 1/3 CUDA C sources compile with NVRTC", "ok": True})
    with part.guard("part 1 C floor"):
        _build_floor(part)

    # part 2
    with part.guard("part 2 kernels"):
        for k in [1, 10, 100] if quick else [1, 10, 100, 1000]:
            source, _ = K.edges_source(k)
            mod = fresh_module(f"cc_edges{k}", source)
            od_ptx(f"2 K={k}", mod.kernel, arr1, f32)
            edges = len(od.explain(mod.kernel, arr1, f32, target="cuda"))
            part.measure(f"2 K={k} edges", edges, "edges")

    # part 3
    with part.guard("part 3 kernels"):
        odm = fresh_module("cc_saxpy_od", K.SAXPY_OD)
        nbm = fresh_module("cc_saxpy_nb", K.SAXPY_NUMBA)
        ptx = od_ptx("3i saxpy (context bench)", odm.saxpy, f32, arr1, arr1, context=odm.bench)
        nb_ptx("3i saxpy", nbm.saxpy, (f32, arr1, arr1))
        # the overdub in context "bench" must win: scale(a) is a, not a * 2
        base = od.code_ptx(odm.saxpy, f32, arr1, arr1, cc=CC)
        part.check("3i saxpy PTX in context bench differs from the base context's", lambda: _differs(ptx, base))
        odr = fresh_module("cc_reduce_od", K.REDUCE_OD)
        nbr = fresh_module("cc_reduce_nb", K.REDUCE_NUMBA)
        od_ptx("3ii reduction", odr.reduce, arr1, arr1)
        nb_ptx("3ii reduction", nbr.reduce, (arr1, arr1))
        st = fresh_module("cc_stencil", K.STENCIL)
        od_ptx("3iii stencil", st.stencil, arr2, arr2)
        nb_ptx("3iii stencil", st.stencil, (arr2, arr2))

    # part 4: selectivity on PTX compiles
    with part.guard("part 4 kernels"):
        mod = fresh_module("cc_library", K.LIBRARY + "\n" + K.library_kernels_source())
        for i in range(K.N_KERNELS):
            od.code_ptx(getattr(mod, f"k{i}"), arr1, f32, cc=CC)
        before = od.stats()["compiles"]
        exec(K.redefine_l_source(2.5), mod.__dict__)
        t0 = time.perf_counter()
        recompiled = []
        for i in range(K.N_KERNELS):
            c = od.stats()["compiles"]
            od.code_ptx(getattr(mod, f"k{i}"), arr1, f32, cc=CC)
            if od.stats()["compiles"] > c:
                recompiled.append(f"k{i}")
        delta = od.stats()["compiles"] - before
        part.measure("4 kernels recompiled after redefining L (PTX)", delta, "kernels", which=recompiled)
        part.measure("4 PTX recompile time of all 20 after redefinition", time.perf_counter() - t0, "s")
        part.target("4 recompiled kernels == 2 (PTX only)", delta, "==", 2)
        nbm = fresh_module("cc_library_nb", K.as_numba_device(K.LIBRARY) + "\n" + K.library_kernels_source())
        try:
            nb_ptx("4 k3", getattr(nbm, f"k{K.L_USERS[0]}"), (arr1, f32))
        except Exception as exc:  # numba-cuda device functions ask the (absent) device for its cc
            if "CudaSupportError" not in type(exc).__name__ and "driver" not in str(exc).lower():
                raise
            part.notes.append(
                "numba-cuda cannot compile part 4's kernel (it calls cuda.jit(device=True) "
                "functions) to PTX without a GPU: skipped here."
            )


def _build_floor(part: Part) -> None:
    """Part 1's C floor builds with the system's C compiler and loads (its launch needs a GPU: not called)."""
    if launch_floor.compiler() is None:
        part.notes.append("no C compiler ($CC or cc): part 1's C floor (benchmarks/launch_floor.c) not built.")
        return
    with tempfile.TemporaryDirectory(prefix="odbench_floor_") as tmp:
        launch_floor.load(launch_floor.build(Path(tmp)))
    part.checks.append({"name": f"part 1 C floor builds with {launch_floor.compiler()} and loads", "ok": True})


def _differs(a: str, b: str) -> None:
    if a == b:
        raise AssertionError("the context's overdub did not change the kernel")
