"""The on-disk kernel cache: a later process loads what an earlier one compiled, and never stale code.

Cross-process behaviour runs real subprocesses on module files in a temporary directory; the rest runs in
this process, where ``runtime.reset()`` forgets every compiled kernel as a new process would.
"""

import dataclasses
import hashlib
import importlib
import inspect
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import overdub as od
import sync_kernels
from helpers import CALLS_F, finish_python, last_json, method_f, run, start_python, unique_name
from overdub import diskcache
from overdub.runtime import runtime
from overdub.targets import cpu

LIB = """
import overdub as od

@od.function
def f(x: od.Integer):
    return x + 1
"""

KERNEL = """
from numba import cuda
from lib import f

N = 10

def kernel(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = f(i) * N
"""

LAUNCH = """
import json, sys, warnings
import numpy as np
import overdub as od
import kern
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    results = []
    for dtype in sys.argv[1:] or ["float64"]:
        out = np.zeros(4, dtype=dtype)
        od.cuda(kern.kernel, out, blocks=1, threads=4, target="cpu")
        results.append(out.tolist())
print(json.dumps({"out": results[0], "all": results, "stats": od.stats(),
                  "warnings": [str(w.message) for w in caught]}))
"""


def start_in(directory, cache, *argv, **env) -> subprocess.Popen:
    """``python *argv`` started in a fresh interpreter that imports the modules of ``directory`` and keeps its
    disk cache in ``cache``."""
    # no bytecode cache: an edit of the same size within the same second must be read again
    env = {"OVERDUB_CACHE_DIR": cache, "OVERDUB_CACHE": None, "PYTHONDONTWRITEBYTECODE": "1", **env}
    return start_python(*argv, path=[directory], env=env)


def run_in(directory, cache, *argv, **env) -> dict:
    """``start_in``, then the JSON record the interpreter printed last."""
    return last_json(finish_python(start_in(directory, cache, *argv, **env)))


def launch_in_new_process(directory, cache, *argv, **env) -> dict:
    """Launch ``kern.kernel`` in a fresh Python: its output, ``od.stats()`` and the warnings it raised."""
    return run_in(directory, cache, "-c", LAUNCH, *argv, **env)


@pytest.fixture
def program(tmp_path):
    """A kernel module calling a generic function of another module, as files; and a cache directory."""
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "kern.py").write_text(KERNEL)
    return tmp_path, tmp_path / "cache"


def _entries(cache) -> list[pathlib.Path]:
    return sorted(pathlib.Path(cache).glob("v*/*/*/*.odk"))


# --- across processes -----------------------------------------------------------------------------------


def test_a_kernel_compiled_in_one_process_is_loaded_by_the_next(program):
    first = launch_in_new_process(*program)
    second = launch_in_new_process(*program)
    assert first["out"] == second["out"] == [10.0, 20.0, 30.0, 40.0]
    assert (first["stats"]["compiles"], first["stats"]["disk_misses"], first["stats"]["disk_hits"]) == (1, 1, 0)
    assert (second["stats"]["compiles"], second["stats"]["disk_hits"]) == (0, 1)
    assert second["stats"]["method_instances"] == 0


def test_editing_a_callee_in_another_modules_file_is_a_miss_with_the_new_result(program):
    directory, _cache = program
    launch_in_new_process(*program)
    (directory / "lib.py").write_text(LIB.replace("x + 1", "x + 2"))
    edited = launch_in_new_process(*program)
    assert edited["out"] == [20.0, 30.0, 40.0, 50.0]
    assert (edited["stats"]["compiles"], edited["stats"]["disk_hits"]) == (1, 0)
    assert launch_in_new_process(*program)["stats"]["disk_hits"] == 1  # the new code is cached in turn


def test_editing_only_the_position_of_a_callee_is_still_a_hit(program):
    directory, _ = program
    launch_in_new_process(*program)
    (directory / "lib.py").write_text("# a comment moves every line\n\n" + LIB)
    moved = launch_in_new_process(*program)
    assert (moved["out"], moved["stats"]["disk_hits"]) == ([10.0, 20.0, 30.0, 40.0], 1)


def test_a_new_method_in_another_module_that_the_call_now_reaches_is_a_miss(program):
    directory, _ = program
    launch_in_new_process(*program, "int64")
    (directory / "lib.py").write_text(LIB + "\n@od.function\ndef f(x: od.int64):\n    return x + 5\n")
    edited = launch_in_new_process(*program, "int64")
    assert (edited["out"], edited["stats"]["compiles"]) == ([50, 60, 70, 80], 1)


def test_rebinding_a_global_in_the_kernels_file_is_a_miss(program):
    directory, _ = program
    launch_in_new_process(*program)
    (directory / "kern.py").write_text(KERNEL.replace("N = 10", "N = 100"))
    rebound = launch_in_new_process(*program)
    assert (rebound["out"], rebound["stats"]["compiles"]) == ([100.0, 200.0, 300.0, 400.0], 1)


def test_a_corrupted_entry_is_compiled_again_with_a_warning(program):
    _directory, cache = program
    launch_in_new_process(*program)
    [entry] = _entries(cache)
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    damaged = launch_in_new_process(*program)
    assert damaged["out"] == [10.0, 20.0, 30.0, 40.0]
    assert damaged["stats"]["compiles"] == 1
    assert any("disk cache entry" in w and "unusable" in w for w in damaged["warnings"])
    assert launch_in_new_process(*program)["stats"]["disk_hits"] == 1  # rewritten whole


def test_a_truncated_entry_is_compiled_again_with_a_warning(program):
    _directory, cache = program
    launch_in_new_process(*program)
    [entry] = _entries(cache)
    entry.write_bytes(entry.read_bytes()[:100])
    truncated = launch_in_new_process(*program)
    assert (truncated["out"], truncated["stats"]["compiles"]) == ([10.0, 20.0, 30.0, 40.0], 1)
    assert any("unusable" in w for w in truncated["warnings"])


def test_two_processes_filling_the_cache_at_once_leave_whole_entries(program):
    directory, cache = program
    dtypes = ["float64", "float32", "int64", "int32"]
    racing = [
        start_in(directory, cache, "-c", LAUNCH, *dtypes),
        start_in(directory, cache, "-c", LAUNCH, *reversed(dtypes)),
    ]
    results = [last_json(finish_python(p)) for p in racing]
    assert all(r["warnings"] == [] for r in results)
    assert len(_entries(cache)) == len(dtypes)
    assert not [p for p in pathlib.Path(cache).rglob(".tmp-*")]
    after = launch_in_new_process(directory, cache, *dtypes)
    assert (after["stats"]["disk_hits"], after["stats"]["compiles"], after["warnings"]) == (len(dtypes), 0, [])
    assert after["all"] == results[0]["all"]


def test_the_cache_is_off_with_OVERDUB_CACHE_0(program):
    directory, cache = program
    first = launch_in_new_process(directory, cache, OVERDUB_CACHE="0")
    second = launch_in_new_process(directory, cache, OVERDUB_CACHE="0")
    assert _entries(cache) == []
    assert second["stats"]["compiles"] == 1
    assert (second["stats"]["disk_hits"], second["stats"]["disk_misses"]) == (0, 0)
    assert first["out"] == second["out"]


# --- in this process, as if new (runtime.reset()) --------------------------------------------------------


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """``modules(lib_source, kernel_source)``: importable modules (unique names) written as files; the kernel
    module imports the library as ``lib``. ``edit(module, source)`` rewrites one and reloads it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    made = []

    def make(lib_source: str, kernel_source: str):
        lib_name, kernel_name = unique_name("odlib"), unique_name("odkern")
        (tmp_path / f"{lib_name}.py").write_text(textwrap.dedent(lib_source))
        (tmp_path / f"{kernel_name}.py").write_text(f"import {lib_name} as lib\n" + textwrap.dedent(kernel_source))
        lib, kern = importlib.import_module(lib_name), importlib.import_module(kernel_name)
        made.extend([lib_name, kernel_name])
        return lib, kern

    yield make
    for name in made:
        sys.modules.pop(name, None)


def edit(module, source: str, prefix: str = ""):
    path = pathlib.Path(module.__file__)
    path.write_text(prefix + textwrap.dedent(source))
    importlib.invalidate_caches()
    sys.modules.pop(module.__name__)
    return importlib.import_module(module.__name__)


LIB_SOURCE = """
    import overdub as od

    @od.function
    def g(x: od.Float):
        return 2.0 * x
"""

KERNEL_SOURCE = """
    from numba import cuda

    SCALE = 3.0

    def kernel(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = lib.g(x[i]) * SCALE
"""


def _launch(kern):
    """The module's ``kernel(out, x)`` on x = [0, 1, 2, 3] on the CPU target: ``out`` as a list."""
    return run(kern.kernel, np.arange(4.0), n=4, dtype=np.float64, blocks=1, threads=4, target="cpu")


def _as_new_process():
    runtime.reset()


def test_a_loaded_kernel_is_invalidated_by_a_redefinition_as_a_compiled_one_is(modules):
    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    assert _launch(kern) == [0.0, 6.0, 12.0, 18.0]
    _as_new_process()
    assert _launch(kern) == [0.0, 6.0, 12.0, 18.0]
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (1, 0)
    assert any(
        "g(float64) -> g(x: Float)" in edge for edge in od.explain(kern.kernel, np.zeros(4), np.zeros(4), target="cpu")
    )

    def g(x: od.float64):
        return 5.0 * x

    lib.g.define(g)
    assert _launch(kern) == [0.0, 15.0, 30.0, 45.0]
    assert od.stats()["compiles"] == 1


def test_a_loaded_kernel_recompiles_when_a_global_it_read_is_rebound(modules):
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    _as_new_process()
    _launch(kern)
    kern.SCALE = 1.0
    assert _launch(kern) == [0.0, 2.0, 4.0, 6.0]
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (1, 1)


def test_a_loaded_kernel_recompiles_when_a_callees_code_is_replaced_in_place(modules):
    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    _as_new_process()
    _launch(kern)
    [method] = lib.g.methods
    method.func.__code__ = (lambda x: 7.0 * x).__code__
    assert _launch(kern) == [0.0, 21.0, 42.0, 63.0]


def test_an_entry_whose_facts_are_tagged_tuples_of_the_first_format_is_a_miss_not_an_error(modules):
    """Format 1 wrote each fact as a tuple tagged by its kind; such an entry, found where this format's would
    be, is a miss: the kernel is compiled again, with no warning."""
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    [path] = _entries(os.environ["OVERDUB_CACHE_DIR"])
    entry = diskcache._read(path)
    entry["facts"] = [(type(fact).__name__, *dataclasses.astuple(fact)) for fact in entry["facts"]]
    body = diskcache._pickled(entry)
    path.write_bytes(diskcache._sealed(diskcache._opened()[1], path.parent.name, body))
    _as_new_process()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _launch(kern) == [0.0, 6.0, 12.0, 18.0]
    assert (od.stats()["disk_hits"], od.stats()["disk_misses"], od.stats()["compiles"]) == (0, 1, 1)


def test_a_callee_edited_between_processes_is_a_miss(modules):
    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    _as_new_process()
    edit(lib, LIB_SOURCE.replace("2.0 * x", "4.0 * x"))
    kern.lib = sys.modules[lib.__name__]
    assert _launch(kern) == [0.0, 12.0, 24.0, 36.0]
    assert (od.stats()["disk_hits"], od.stats()["disk_misses"], od.stats()["compiles"]) == (0, 1, 1)


def test_an_overdub_added_in_a_context_between_processes_is_a_miss(modules):
    lib, kern = modules(
        LIB_SOURCE
        + """
    ctx = od.Context("scaled")
    """,
        KERNEL_SOURCE,
    )
    out, x = np.zeros(4), np.arange(4, dtype=np.float64)
    od.cuda(kern.kernel, out, x, blocks=1, threads=4, target="cpu", context=lib.ctx)
    _as_new_process()

    @lib.ctx.overdub(lib.g)
    def g(x: od.Float):
        return -1.0

    od.cuda(kern.kernel, out, x, blocks=1, threads=4, target="cpu", context=lib.ctx)
    assert out.tolist() == [-3.0] * 4
    assert od.stats()["disk_hits"] == 0


def test_a_kernel_calling_a_lambda_found_by_its_global_is_cached(modules):
    _lib, kern = modules(
        """
        h = lambda x: x + 1.0
    """,
        """
        def kernel(out, x):
            out[0] = lib.h(x[0])
    """,
    )
    _launch(kern)
    _as_new_process()
    assert _launch(kern)[0] == 1.0
    assert (od.stats()["compiles"], od.stats()["disk_hits"]) == (0, 1)


def test_a_kernel_calling_a_numba_intrinsic_of_the_users_code_is_compiled_and_not_stored(modules):
    _lib, kern = modules(
        """
        from numba.core import types
        from numba.core.extending import intrinsic

        @intrinsic
        def forty_two(typingctx):
            def codegen(context, builder, signature, args):
                return context.get_constant(types.float64, 42.0)
            return types.float64(), codegen
    """,
        """
        def kernel(out, x):
            out[0] = lib.forty_two()
    """,
    )
    assert _launch(kern)[0] == 42.0
    _as_new_process()
    _launch(kern)
    assert (od.stats()["disk_uncacheable"], od.stats()["compiles"], od.stats()["disk_hits"]) == (1, 1, 0)


def test_a_closure_kernel_capturing_a_function_is_compiled_and_not_stored():
    def make(helper):
        def kernel(out):
            out[0] = helper(1.0)

        return kernel

    kernel = make(lambda v: v + 1.0)
    out = np.zeros(1)
    od.cuda(kernel, out, target="cpu")
    assert out[0] == 2.0
    assert od.stats()["disk_uncacheable"] == 1


def test_a_kernel_reading_only_its_own_modules_globals_is_cached_even_where_that_module_is_not_importable(make_module):
    m = make_module("""
        N = 1

        def kernel(out):
            out[0] = N
    """)
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    _as_new_process()
    m.N = 2
    od.cuda(m.kernel, out, target="cpu")
    assert (out[0], od.stats()["compiles"], od.stats()["disk_misses"]) == (2, 1, 1)
    _as_new_process()
    od.cuda(m.kernel, out, target="cpu")
    assert od.stats()["disk_hits"] == 1


def test_a_kernel_calling_a_generic_function_that_cannot_be_imported_is_not_stored(make_module):
    m = make_module(method_f("x + 1") + CALLS_F)
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    _as_new_process()
    od.cuda(m.kernel, out, target="cpu")
    assert (out[0], od.stats()["compiles"], od.stats()["disk_hits"]) == (1, 1, 0)
    assert od.stats()["disk_uncacheable"] == 1


def test_a_kernel_reading_the_grid_state_through_a_callee_runs_loaded(modules):
    _lib, kern = modules(
        """
        from numba import cuda

        def lane():
            return cuda.threadIdx.x + 10 * cuda.blockIdx.x
    """,
        """
        def kernel(out, x):
            i = lib.lane()
            if i < out.size:
                out[i] = i
    """,
    )
    out, x = np.zeros(8), np.zeros(8)
    od.cuda(kern.kernel, out, x, blocks=2, threads=4, target="cpu")
    _as_new_process()
    loaded = np.zeros(8)
    od.cuda(kern.kernel, loaded, x, blocks=2, threads=4, target="cpu")
    assert od.stats()["disk_hits"] == 1
    assert loaded.tolist() == out.tolist() == [0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0]


def test_the_cache_directory_is_bounded_by_dropping_the_least_recently_used(tmp_path):
    root = tmp_path / "v1"
    for i, age in enumerate([30, 20, 10]):
        path = root / "ab" / "abkey" / f"{i}.odk"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 100)
        os.utime(path, (time.time() - age, time.time() - age))
    diskcache._trim(root, 250)
    assert sorted(p.name for p in root.glob("*/*/*.odk")) == ["1.odk", "2.odk"]


def _aged_entry(root, name: str, age: float, size: int = 100) -> None:
    path = root / "ab" / "abkey" / f"{name}.odk"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (time.time() - age, time.time() - age))


def test_the_bound_counts_this_processs_own_writes_between_scans(tmp_path):
    root = tmp_path / "v1"
    for i, age in enumerate([30, 20, 10]):
        _aged_entry(root, str(i), age)
        diskcache._bound(root, 100, 250)  # the third write passes the bound: the oldest entry goes
    assert sorted(p.name for p in root.glob("*/*/*.odk")) == ["1.odk", "2.odk"]


def test_the_bound_sees_other_processes_writes_at_the_next_scan(tmp_path, monkeypatch):
    monkeypatch.setattr(diskcache, "_RESCAN_SECONDS", 0.0)
    root = tmp_path / "v1"
    _aged_entry(root, "mine", 10)
    diskcache._bound(root, 100, 250)
    _aged_entry(root, "theirs", 30, size=200)  # written by another process: this one did not count it
    _aged_entry(root, "mine2", 0)
    diskcache._bound(root, 100, 250)
    assert sorted(p.name for p in root.glob("*/*/*.odk")) == ["mine.odk", "mine2.odk"]


def test_an_object_known_by_a_variable_is_found_where_it_is_now():
    from overdub.digests import Uncacheable
    from overdub.locators import object_ref

    name = unique_name("holder")
    module = sys.modules[name] = type(sys)(name)
    registry = type("Registry", (), {"__module__": name})()  # no name of its own: found by a variable
    try:
        module.tables = registry
        assert object_ref(registry) == (name, "tables")
        del module.tables
        module.renamed = registry
        assert object_ref(registry) == (name, "renamed")
        del module.renamed
        with pytest.raises(Uncacheable):
            object_ref(registry)
    finally:
        del sys.modules[name]


def test_a_hit_refreshes_its_entry_for_the_lru(modules, monkeypatch):
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    [entry] = _entries(os.environ["OVERDUB_CACHE_DIR"])
    os.utime(entry, (0, 0))
    _as_new_process()
    _launch(kern)
    assert entry.stat().st_mtime > time.time() - 60


# --- CUDA: PTX without a GPU ----------------------------------------------------------------------------


def test_ptx_is_loaded_from_the_cache_and_missed_after_a_callee_edit(modules):
    from numba import float64

    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    ptx = od.code_ptx(kern.kernel, float64[::1], float64[::1], cc=(8, 0))
    _as_new_process()
    assert od.code_ptx(kern.kernel, float64[::1], float64[::1], cc=(8, 0)) == ptx
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (1, 0)
    _as_new_process()
    edit(lib, LIB_SOURCE.replace("2.0 * x", "4.0 * x"))
    kern.lib = sys.modules[lib.__name__]
    edited = od.code_ptx(kern.kernel, float64[::1], float64[::1], cc=(8, 0))
    assert edited != ptx
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (0, 1)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A usable GPU of compute capability 8.0, as far as storing and loading entries goes: numba-cuda's
    cubin -- linked from the PTX for the device's arch-specific target -- stands in as that PTX. Returns the
    compute capabilities NVVM was asked to compile for."""
    from numba.cuda.codegen import CUDACodeLibrary

    from overdub.targets import cuda as cuda_target

    compiled = []

    def get_asm_strs(self, cc=None):
        if cc not in self._ptx_cache:
            compiled.append(cc)
            self._ptx_cache[cc] = [f"// PTX for {cc}"]
        return self._ptx_cache[cc]

    def get_cubin(self, cc=None):
        cc = cc or (8, 0, "a")
        self._cubin_cache[cc] = self.get_asm_str(cc=cc).encode()
        return self._cubin_cache[cc]

    monkeypatch.setattr(CUDACodeLibrary, "get_asm_strs", get_asm_strs)
    monkeypatch.setattr(CUDACodeLibrary, "get_cubin", get_cubin)
    monkeypatch.setattr(cuda_target, "gpu_usable", lambda: True)
    monkeypatch.setattr(cuda_target, "device_cc", lambda: (8, 0))
    monkeypatch.setattr(cuda_target, "make_current", lambda verify=False: None)  # no driver to make current
    return compiled


def _compile_for_launch(kern):
    """What a CUDA launch compiles (the launch itself needs the driver)."""
    from numba import float64

    from overdub.call import KernelCall
    from overdub.targets import cuda as cuda_target

    args = (float64[::1], float64[::1])
    return KernelCall.of(kern.kernel, args, cuda_target.target_for((8, 0)), typed=True).compiled()


def _cubins(cache) -> list:
    return [diskcache._read(entry)["payload"]["library"]["cubin_cache"] for entry in _entries(cache)]


def test_with_a_gpu_a_launchs_entry_holds_the_cubin_and_nvvm_runs_once(modules, fake_gpu):
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _compile_for_launch(kern)
    assert fake_gpu == [(8, 0, "a")]
    assert _cubins(os.environ["OVERDUB_CACHE_DIR"]) == [{(8, 0, "a"): b"// PTX for (8, 0, 'a')"}]


def test_with_a_gpu_code_ptx_links_no_cubin_and_a_launch_does_not_load_its_entry(modules, fake_gpu):
    from numba import float64

    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    assert od.code_ptx(kern.kernel, float64[::1], float64[::1], cc=(8, 0)) == "// PTX for (8, 0)"
    assert fake_gpu == [(8, 0)]
    assert _cubins(os.environ["OVERDUB_CACHE_DIR"]) == [{}]
    _as_new_process()
    _compile_for_launch(kern)  # the entry has no cubin to load: compiled again, stored with it
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (0, 1)
    assert _cubins(os.environ["OVERDUB_CACHE_DIR"]) == [{(8, 0, "a"): b"// PTX for (8, 0, 'a')"}]
    for _ in range(2):
        _as_new_process()
        _compile_for_launch(kern)
        od.code_llvm(kern.kernel, float64[::1], float64[::1], cc=(8, 0))
        assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (1, 0)


@pytest.mark.gpu
def test_a_cuda_kernel_compiled_in_one_process_is_launched_loaded_in_the_next(tmp_path):
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "kern.py").write_text(KERNEL)
    script = """
import json, cupy, overdub as od, kern
out = cupy.zeros(4)
od.cuda(kern.kernel, out, blocks=1, threads=4, target="cuda")
print(json.dumps({"out": out.get().tolist(), "stats": od.stats()}))
"""
    results = [run_in(tmp_path, tmp_path / "cache", "-c", script) for _ in range(2)]
    assert results[0]["out"] == results[1]["out"] == [10.0, 20.0, 30.0, 40.0]
    assert (results[1]["stats"]["disk_hits"], results[1]["stats"]["compiles"]) == (1, 0)


# --- the CPU target's grid modes across processes ------------------------------------------------------

SYNC_LIB = (
    """
import numba
import overdub as od
from numba import cuda


"""
    + inspect.getsource(sync_kernels.block_prefix.methods[0].func)
    + """

def lane():
    return cuda.threadIdx.x + 100 * cuda.blockIdx.x
"""
)

SYNC_KERNELS = (
    f"""
import numba
from numba import cuda
from synclib import block_prefix, lane

REDUCE_THREADS = {sync_kernels.REDUCE_THREADS}


"""
    + "\n\n".join(
        inspect.getsource(getattr(sync_kernels, name))
        for name in ("tree_sum", "barrier_votes", "scan_in_callee", "warp_sum", "two_phase")
    )
    + """

def lanes(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = lane()


def checked_sqrt(a, out):
    i = cuda.grid(1)
    if a[i] < 0:
        raise ValueError("a negative input")
    out[i] = a[i] ** 0.5
"""
)
"""Kernels of every grid mode for the processes below: sync_kernels' own source, and two that need no fibers."""

SYNC_LAUNCH = """
import json, sys
if sys.argv[1] == "serial":
    sys.modules["overdub.targets.cpu._cpugrid"] = None          # as where no C compiler built the runner
import numpy as np
import overdub as od
import synckern as k

cpu = dict(target="cpu")
results = {}
if sys.argv[1] == "runner":
    a = np.arange(256.0)
    out = np.zeros(2)
    od.cuda(k.tree_sum, a, out, blocks=2, threads=k.REDUCE_THREADS, **cpu)
    results["tree_sum"] = out.tolist()
    votes = np.zeros((2, 3), dtype=np.int64)
    od.cuda(k.barrier_votes, np.arange(128) - 100, votes, blocks=2, threads=64, **cpu)
    results["barrier_votes"] = votes.tolist()
    ai = np.arange(128, dtype=np.int64) % 7
    scanned = np.zeros(128, dtype=np.int64)
    od.cuda(k.scan_in_callee, ai, scanned, blocks=2, threads=64, **cpu)
    results["scan_in_callee"] = scanned.tolist()
    total = np.zeros(1, dtype=np.int64)
    od.cuda(k.warp_sum, ai, total, blocks=2, threads=64, **cpu)
    results["warp_sum"] = total.tolist()
    first, second = np.zeros(64, dtype=np.int64), np.zeros(64, dtype=np.int64)
    od.cuda(k.two_phase, first, second, blocks=8, threads=8, **cpu)
    results["two_phase"] = second.tolist()
out = np.zeros(8)
od.cuda(k.lanes, out, blocks=2, threads=4, **cpu)
results["lanes"] = out.tolist()
x, roots = np.array([4.0, 9.0]), np.zeros(2)
od.cuda(k.checked_sqrt, x, roots, blocks=1, threads=2, **cpu)
results["checked_sqrt"] = roots.tolist()
try:
    od.cuda(k.checked_sqrt, np.array([1.0, -1.0]), roots, blocks=1, threads=2, **cpu)
    results["raised"] = None
except ValueError as error:
    results["raised"] = str(error)
print(json.dumps({"results": results, "stats": od.stats()}))
"""


def _expected_sync_results(mode: str) -> dict:
    ai = np.arange(128) % 7
    expected = {
        "lanes": [0.0, 1.0, 2.0, 3.0, 100.0, 101.0, 102.0, 103.0],
        "checked_sqrt": [2.0, 3.0],
        "raised": "a negative input",
    }
    if mode == "runner":
        expected.update(
            {
                "tree_sum": np.arange(256.0).reshape(2, 128).sum(axis=1).tolist(),
                "barrier_votes": [[0, 0, 0], [27, 0, 1]],  # block 1: 27 of -36..27 positive, not all, some
                "scan_in_callee": np.concatenate([np.cumsum(ai[:64]), np.cumsum(ai[64:])]).tolist(),
                "warp_sum": [int(ai.sum())],
                "two_phase": [((i + 8) % 64) * 3 for i in range(64)],
                "raised": None,  # with the runner, a raise without debug ends its thread alone, as on CUDA
            }
        )
    return expected


def _sync_process(directory, cache, mode: str) -> dict:
    return run_in(directory, cache, "-c", SYNC_LAUNCH, mode)


@pytest.fixture
def sync_program(tmp_path):
    (tmp_path / "synclib.py").write_text(SYNC_LIB)
    (tmp_path / "synckern.py").write_text(SYNC_KERNELS)
    return tmp_path, tmp_path / "cache"


@pytest.mark.skipif(
    cpu.runner.SYMBOLS is None, reason="overdub.targets.cpu._cpugrid is not built (tests/test_cpu_sync.py fails for it)"
)
def test_cpu_kernels_of_every_grid_mode_are_loaded_by_the_next_process_and_run_in_their_mode(sync_program):
    """Barriers and shared memory (a kernel's own, a callee's), barrier votes, warp shuffles, a grid sync, a
    callee reading the grid state, an exception: the second process compiles nothing, and each loaded kernel
    computes what the compiled one did (a barrier kernel run in the grid loop's mode would abort the process)."""
    first = _sync_process(*sync_program, "runner")
    second = _sync_process(*sync_program, "runner")
    assert first["results"] == second["results"] == _expected_sync_results("runner")
    assert (first["stats"]["compiles"], first["stats"]["disk_hits"]) == (7, 0)
    assert (second["stats"]["compiles"], second["stats"]["disk_hits"], second["stats"]["method_instances"]) == (0, 7, 0)


def test_a_process_without_the_runner_neither_loads_nor_is_loaded_by_one_with_it(sync_program):
    """Where the runner is not built, a kernel is the serial grid loop: stored under another key (the cache
    tag names the runner), loaded by the next such process; a process with the runner compiles its own."""
    serial = [_sync_process(*sync_program, "serial") for _ in range(2)]
    assert serial[0]["results"] == serial[1]["results"] == _expected_sync_results("serial")
    assert [(r["stats"]["compiles"], r["stats"]["disk_hits"]) for r in serial] == [(2, 0), (0, 2)]
    if cpu.runner.SYMBOLS is not None:
        runner = _sync_process(*sync_program, "runner")
        assert runner["results"] == _expected_sync_results("runner")
        assert (runner["stats"]["compiles"], runner["stats"]["disk_hits"]) == (7, 0)


# --- what is and is not stored ---------------------------------------------------------------------------


@pytest.fixture
def pointer_module(modules):
    return modules(
        """
        import overdub as od

        @od.function
        def store(p: od.Ptr[od.Float], i: od.Integer, v):
            p[i] = v
    """,
        """
        from numba import cuda

        def kernel(p, n):
            i = cuda.grid(1)
            if i < n:
                lib.store(p, i, 2.0 * i)
    """,
    )


def test_a_kernel_taking_a_pointer_is_stored_and_loaded(pointer_module):
    _lib, kern = pointer_module
    for expected_hits in (0, 1):
        _as_new_process()
        out = np.zeros(4)
        od.cuda(kern.kernel, od.pointer(out), 4, blocks=1, threads=4, target="cpu")
        assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
        assert od.stats()["disk_hits"] == expected_hits


def test_a_checked_debug_kernel_is_compiled_and_not_stored(modules):
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    out, x = np.zeros(4), np.arange(4, dtype=np.float64)
    od.cuda(kern.kernel, out, x, blocks=1, threads=4, target="cpu", debug=True)
    _as_new_process()
    od.cuda(kern.kernel, out, x, blocks=1, threads=4, target="cpu", debug=True)
    assert (od.stats()["compiles"], od.stats()["disk_hits"], od.stats()["disk_uncacheable"]) == (1, 0, 1)


def test_kernels_compiled_with_other_options_are_other_entries(modules):
    from overdub.targets import CompileOptions, get_target

    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    plain = get_target("cpu")
    fast = plain.configured(CompileOptions(fastmath=True))
    assert fast.cache_tag != plain.cache_tag
    out, x = np.zeros(4), np.arange(4, dtype=np.float64)
    for target in (plain, fast):
        od.cuda(kern.kernel, out, x, blocks=1, threads=4, target=target)
    assert len(_entries(os.environ["OVERDUB_CACHE_DIR"])) == 2
    _as_new_process()
    for target in (fast, plain):
        od.cuda(kern.kernel, out, x, blocks=1, threads=4, target=target)
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (2, 0)


def test_a_function_passed_as_an_argument_to_a_generic_function_makes_the_kernel_uncacheable(modules):
    _lib, kern = modules(
        """
        import overdub as od

        def twice(v):
            return 2.0 * v

        @od.function
        def apply(f, v: od.Float):
            return f(v)
    """,
        """
        def kernel(out, x):
            out[0] = lib.apply(lib.twice, x[1])
    """,
    )
    assert _launch(kern)[0] == 2.0
    _as_new_process()
    assert _launch(kern)[0] == 2.0
    assert od.stats()["disk_hits"] == 0


STRUCT_LIB = """
    import overdub as od

    @od.struct
    class Particle:
        mass: od.float32
        speed: od.float32
"""

STRUCT_KERNEL = """
    from numba import cuda

    def kernel(out, ps):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = ps[i].speed
"""


def test_a_struct_edited_in_its_file_is_another_entry(modules):
    lib, kern = modules(STRUCT_LIB, STRUCT_KERNEL)
    ps = od.struct_array(lib.Particle, 2, target="cpu")
    ps["speed"] = [1.0, 2.0]
    out = np.zeros(2)
    od.cuda(kern.kernel, out, ps, blocks=1, threads=2, target="cpu")
    assert out.tolist() == [1.0, 2.0]
    _as_new_process()
    od.cuda(kern.kernel, out, ps, blocks=1, threads=2, target="cpu")
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (1, 0)
    _as_new_process()
    lib = edit(lib, STRUCT_LIB.replace("speed: od.float32", "speed: od.float64"))
    kern.lib = lib
    ps = od.struct_array(lib.Particle, 2, target="cpu")
    ps["speed"] = [3.0, 4.0]
    od.cuda(kern.kernel, out, ps, blocks=1, threads=2, target="cpu")
    assert out.tolist() == [3.0, 4.0]
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (0, 1)


def test_a_kernel_typed_by_an_overload_in_the_users_code_is_compiled_and_not_stored(modules):
    _lib, kern = modules(
        """
        import math
        from numba.core.extending import overload

        @overload(math.comb)
        def comb(n, k):
            return lambda n, k: n * 10 + k
    """,
        """
        import math

        def kernel(out, x):
            out[0] = math.comb(3, 2)
    """,
    )
    assert _launch(kern)[0] == 32.0
    _as_new_process()
    _launch(kern)
    assert (od.stats()["disk_uncacheable"], od.stats()["compiles"], od.stats()["disk_hits"]) == (1, 1, 0)


def test_a_kernel_calling_a_method_from_an_overload_method_in_the_users_code_is_not_stored(modules):
    """numba types ``x.method()`` by attribute templates, never through overdub's dispatch: still a need."""
    _lib, kern = modules(
        """
        from numba.core import types
        from numba.core.extending import overload_method

        @overload_method(types.Array, "odtest_twice")
        def twice(arr, i):
            return lambda arr, i: arr[i] * 2.0
    """,
        """
        def kernel(out, x):
            out[0] = x.odtest_twice(3)
    """,
    )
    assert _launch(kern)[0] == 6.0
    _as_new_process()
    _launch(kern)
    assert (od.stats()["disk_uncacheable"], od.stats()["compiles"], od.stats()["disk_hits"]) == (1, 1, 0)


STATE_LIB = """
    import overdub as od
    from numba import cuda

    counted = od.Context("counted", state=od.Array[od.int64, 1])

    def f(x):
        return x + 1.0
"""

STATE_KERNEL = """
    import overdub as od
    from numba import cuda

    def kernel(out, x):
        i = cuda.grid(1)
        if i < out.size:
            cuda.atomic.add(od.state(), 0, 1)
            out[i] = lib.f(x[i])
"""


def test_a_kernel_launched_with_state_is_loaded_with_the_same_state_type(modules):
    lib, kern = modules(STATE_LIB, STATE_KERNEL)
    for expected_hits in (0, 1):
        _as_new_process()
        out, x, counts = np.zeros(4), np.arange(4.0), np.zeros(1, dtype=np.int64)
        od.cuda(kern.kernel, out, x, blocks=1, threads=4, target="cpu", context=lib.counted, state=counts)
        assert (out.tolist(), counts.tolist()) == ([1.0, 2.0, 3.0, 4.0], [4])
        assert od.stats()["disk_hits"] == expected_hits


def test_a_kernel_in_a_context_with_hooks_is_compiled_and_not_stored(modules):
    lib, kern = modules(
        STATE_LIB
        + """
    @counted.prehook(f)
    def _(x):
        cuda.atomic.add(od.state(), 0, 10)
    """,
        STATE_KERNEL,
    )
    for _ in range(2):
        _as_new_process()
        out, x, counts = np.zeros(4), np.arange(4.0), np.zeros(1, dtype=np.int64)
        od.cuda(kern.kernel, out, x, blocks=1, threads=4, target="cpu", context=lib.counted, state=counts)
        assert counts.tolist() == [44]
        assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (0, 1)


def _edited_between_processes(modules, lib_source, kernel_source, old, new):
    """Launch, forget everything, edit the library's file, launch again: the two results and the stats."""
    lib, kern = modules(lib_source, kernel_source)
    before = _launch(kern)
    _as_new_process()
    assert _launch(kern) == before and od.stats()["disk_hits"] == 1  # unchanged: loaded
    _as_new_process()
    kern.lib = edit(lib, lib_source.replace(old, new))
    return before, _launch(kern), od.stats()


def test_a_plain_device_function_edited_between_processes_is_a_miss(modules):
    before, after, stats = _edited_between_processes(
        modules,
        """
        def helper(v):
            return v + 1.0
    """,
        """
        def kernel(out, x):
            i = 0
            while i < out.size:
                out[i] = lib.helper(x[i])
                i += 1
    """,
        "v + 1.0",
        "v + 5.0",
    )
    assert (before, after) == ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0])
    assert (stats["disk_hits"], stats["compiles"]) == (0, 1)


def test_a_global_array_edited_between_processes_is_a_miss(modules):
    """The CPU target reads a global array live, through its pointer: such a kernel is never stored."""
    lib_source = """
        import numpy as np
        WEIGHTS = np.array([1.0, 2.0, 3.0, 4.0])
    """
    lib, kern = modules(
        lib_source,
        """
        def kernel(out, x):
            for i in range(out.size):
                out[i] = lib.WEIGHTS[i] * x[i]
    """,
    )
    before = _launch(kern)
    _as_new_process()
    assert _launch(kern) == before and (od.stats()["disk_hits"], od.stats()["disk_uncacheable"]) == (0, 1)
    _as_new_process()
    kern.lib = edit(lib, lib_source.replace("4.0])", "40.0])"))
    after, stats = _launch(kern), od.stats()
    assert (before[3], after[3]) == (12.0, 120.0)
    assert (stats["disk_hits"], stats["compiles"]) == (0, 1)


def test_a_default_value_edited_between_processes_is_a_miss(modules):
    before, after, stats = _edited_between_processes(
        modules,
        """
        import overdub as od

        @od.function
        def g(x: od.Float, k=2.0):
            return k * x
    """,
        """
        def kernel(out, x):
            for i in range(out.size):
                out[i] = lib.g(x[i])
    """,
        "k=2.0",
        "k=3.0",
    )
    assert (before[1], after[1]) == (2.0, 3.0)
    assert (stats["disk_hits"], stats["compiles"]) == (0, 1)


PRINTING = """
import os, sys
import numpy as np
import overdub as od

@od.function
def say(x: od.Integer):
    print("callee says", x)

def kernel(out):
    say(7)
    out[0] = 1

od.cuda(kernel, np.zeros(1), target="cpu")
os.write(1, b"after the launch\\n")          # unbuffered: it follows what the launch flushed
print(od.stats()["disk_hits"])
"""


def test_a_kernel_whose_callee_prints_flushes_at_the_end_of_its_launch_compiled_or_loaded(tmp_path):
    outputs = []
    for _ in range(2):  # C's stdout buffered, as into a pipe it is by default
        done = finish_python(start_in(tmp_path, tmp_path / "cache", "-c", PRINTING, PYTHONUNBUFFERED=None))
        outputs.append(done.stdout.splitlines())
    assert outputs[0] == ["callee says 7", "after the launch", "0"]
    assert outputs[1] == ["callee says 7", "after the launch", "1"]  # loaded from the disk cache


# --- code numba compiles itself, from an installed package ----------------------------------------------

INSTALLED = """
import numba

K = 20.0


@numba.njit
def inner(x):
    return x + K


@numba.njit
def helper(x):
    return inner(x) + 0.0
"""

INSTALLED_KERNEL = """
from instpkg import helper


def kernel(out):
    out[0] = helper(0.0)
"""

INSTALLED_LAUNCH = """
import json, sys
sys.path.insert(0, sys.argv[1])
from overdub import libraries
libraries._LIBRARY_PATHS += (sys.argv[1] + "/",)   # the directory is an installed package's, as site-packages
import numpy as np, overdub as od, kern, instpkg
out = np.zeros(1)
od.cuda(kern.kernel, out, target="cpu")
print(json.dumps({"out": out[0], "host": instpkg.helper(0.0), "stats": od.stats()}))
"""


def _installed_run(tmp_path) -> dict:
    return run_in(tmp_path, tmp_path / "cache", "-c", INSTALLED_LAUNCH, tmp_path / "site")


@pytest.mark.parametrize(
    "old, new",
    [("K = 20.0", "K = 33.0"), ("return x + K", "return x + K + 13.0"), ("inner(x) + 0.0", "inner(x) + 13.0")],
    ids=["a module constant", "another njit function it calls", "its own code"],
)
def test_an_installed_packages_njit_helper_changed_between_processes_is_a_miss(tmp_path, old, new):
    """numba compiles an @njit helper itself, freezing what it reads: the entry digests all of it."""
    package = tmp_path / "site" / "instpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(INSTALLED)
    (tmp_path / "kern.py").write_text(INSTALLED_KERNEL)
    first = _installed_run(tmp_path)
    assert (first["out"], first["stats"]["disk_uncacheable"]) == (20.0, 0)
    assert _installed_run(tmp_path)["stats"]["disk_hits"] == 1
    (package / "__init__.py").write_text(INSTALLED.replace(old, new))
    changed = _installed_run(tmp_path)
    assert changed["out"] == changed["host"] == 33.0
    assert (changed["stats"]["disk_hits"], changed["stats"]["compiles"]) == (0, 1)


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """``installed(source)``: a module of a package directory treated as installed (as site-packages is)."""
    from overdub import libraries

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(libraries, "_LIBRARY_PATHS", libraries._LIBRARY_PATHS + (f"{tmp_path}{os.sep}",))
    made = []

    def make(source: str):
        name = unique_name("odinst")
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        made.append(name)
        return importlib.import_module(name)

    yield make
    for name in made:
        sys.modules.pop(name, None)


def test_an_installed_packages_overload_is_digested_with_its_implementation(installed, make_module):
    pkg = installed("""
        from numba.core.extending import overload

        SHIFT = 1

        def placeholder(x):
            raise NotImplementedError

        @overload(placeholder)
        def _placeholder(x):
            return lambda x: x * 10 + SHIFT
    """)
    m = make_module(f"import {pkg.__name__} as pkg\n\ndef kernel(out):\n    out[0] = pkg.placeholder(3)\n")
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    _as_new_process()
    od.cuda(m.kernel, out, target="cpu")
    assert (out[0], od.stats()["disk_hits"]) == (31.0, 1)
    _as_new_process()
    pkg.SHIFT = 2  # what the overload's implementation reads: numba freezes it (and, in this process, keeps it)
    od.cuda(m.kernel, out, target="cpu")
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (0, 1)


def test_an_installed_packages_attribute_is_not_stored_though_its_overload_in_the_same_module_is_digested(
    installed, make_module
):
    """A fact digests the ``@overload`` the kernel names; the ``@overload_attribute`` of the same module that
    typed ``out.odtest_attr`` is no fact: a package edited there must not load stale code."""
    pkg = installed("""
        from numba.core import types
        from numba.core.extending import overload, overload_attribute

        def placeholder(x):
            raise NotImplementedError

        @overload(placeholder)
        def _placeholder(x):
            return lambda x: x * 10

        @overload_attribute(types.Array, "odtest_attr")
        def _attr(arr):
            return lambda arr: arr.shape[0] + 1
    """)
    m = make_module(
        f"import {pkg.__name__} as pkg\n\ndef kernel(out):\n    out[0] = pkg.placeholder(3) + out.odtest_attr\n"
    )
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    assert (out[0], od.stats()["disk_uncacheable"]) == (32.0, 1)


def test_an_installed_packages_object_numba_knows_only_by_name_is_compiled_and_not_stored(installed, make_module):
    pkg = installed("""
        from numba.core import types
        from numba.core.typing.templates import AbstractTemplate, infer_global, signature
        from numba.core.imputils import lower_builtin

        def seven():
            raise NotImplementedError

        @infer_global(seven)
        class Seven(AbstractTemplate):
            def generic(self, args, kws):
                return signature(types.float64)

        @lower_builtin(seven)
        def lower_seven(context, builder, sig, args):
            return context.get_constant(types.float64, 7.0)
    """)
    m = make_module(f"import {pkg.__name__} as pkg\n\ndef kernel(out):\n    out[0] = pkg.seven()\n")
    out = np.zeros(1)
    od.cuda(m.kernel, out, target="cpu")
    assert (out[0], od.stats()["disk_uncacheable"]) == (7.0, 1)


# --- recompiles after a load, versions of a key ----------------------------------------------------------


def test_a_recompile_after_a_load_is_stored(modules):
    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    _as_new_process()
    _launch(kern)

    def g(x: od.float64):
        return 5.0 * x

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib.g.define(g)
        assert _launch(kern) == [0.0, 15.0, 30.0, 45.0]
    assert (od.stats()["disk_hits"], od.stats()["compiles"], od.stats()["disk_uncacheable"]) == (1, 1, 0)
    assert len(_entries(os.environ["OVERDUB_CACHE_DIR"])) == 2


def test_alternating_definitions_each_hit_their_own_version_of_the_key(modules):
    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    stats = []
    for factor in ("2.0", "3.0", "2.0", "5.0", "3.0"):
        _as_new_process()
        kern.lib = edit(lib, LIB_SOURCE.replace("2.0 * x", f"{factor} * x"))
        assert _launch(kern)[1] == float(factor) * 3.0
        stats.append((od.stats()["compiles"], od.stats()["disk_hits"]))
    assert stats == [(1, 0), (1, 0), (0, 1), (1, 0), (0, 1)]


def test_a_key_keeps_at_most_VERSIONS_entries(modules, monkeypatch):
    monkeypatch.setattr(diskcache, "VERSIONS", 2)
    lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    for factor in ("2.0", "3.0", "4.0"):
        _as_new_process()
        kern.lib = edit(lib, LIB_SOURCE.replace("2.0 * x", f"{factor} * x"))
        _launch(kern)
    assert len(_entries(os.environ["OVERDUB_CACHE_DIR"])) == 2


# --- trust ------------------------------------------------------------------------------------------------


class _Planted:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_a_planted_entry_without_the_users_secret_is_never_unpickled(modules, tmp_path):
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    [path] = _entries(os.environ["OVERDUB_CACHE_DIR"])
    marker = tmp_path / "ran"
    body = pickle.dumps({"facts": [], "payload": _Planted(str(marker)), "needs": set()})
    path.write_bytes(diskcache._MAGIC + hashlib.sha256(body).digest() + body)  # an unkeyed checksum: all one can forge
    _as_new_process()
    with pytest.warns(RuntimeWarning, match="signature does not match"):
        assert _launch(kern) == [0.0, 6.0, 12.0, 18.0]
    assert not marker.exists()
    assert (od.stats()["disk_hits"], od.stats()["compiles"]) == (0, 1)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_cache_directory_writable_by_others_is_refused_with_one_warning(modules, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("OVERDUB_CACHE_DIR", str(shared))
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, x = np.zeros(4), np.arange(4.0)
        for dtype in (np.float64, np.float32):
            od.cuda(kern.kernel, out.astype(dtype), x, blocks=1, threads=4, target="cpu")
    assert [str(w.message) for w in caught if "writable by other users" in str(w.message)] != []
    assert len([w for w in caught if "disk cache" in str(w.message)]) == 1
    assert list(shared.iterdir()) == []
    assert (od.stats()["compiles"], od.stats()["disk_misses"]) == (2, 0)


def test_the_secret_is_private_to_the_user(modules):
    _lib, kern = modules(LIB_SOURCE, KERNEL_SOURCE)
    _launch(kern)
    secret = pathlib.Path(os.environ["OVERDUB_CACHE_DIR"]) / "secret"
    assert secret.stat().st_mode & 0o777 == 0o600


def test_temporary_files_of_dead_writers_are_removed_and_live_ones_counted(tmp_path):
    root = tmp_path / "v3"
    _aged_entry(root, "entry", 10)
    _aged_entry(root, ".tmp-dead", 3600)
    _aged_entry(root, ".tmp-live", 1, size=300)
    assert diskcache._trim(root, 1000) == 400
    assert sorted(p.name for p in root.glob("*/*/*")) == [".tmp-live.odk", "entry.odk"]
    diskcache._trim(root, 350)  # the live temporary file counts against the bound: the entry goes
    assert sorted(p.name for p in root.glob("*/*/*")) == [".tmp-live.odk"]


def test_the_versions_key_covers_the_c_runner_and_the_built_extensions(tmp_path):
    """Compiled kernels lay out what they share with the CPU target's runner (a pass's record, a frame) as its C
    code does: a changed C source or rebuilt extension is another version of overdub, as a changed module is."""
    source_digest = diskcache.source_digest
    package = tmp_path / "pkg"
    (package / "targets").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "targets" / "_runner.c").write_text("int f(void) { return 1; }\n")
    (package / "targets" / "_runner.abi3.so").write_bytes(b"\x7fELF one")
    (package / "notes.txt").write_text("not code")
    first = source_digest(package)
    (package / "notes.txt").write_text("still not code")
    assert source_digest(package) == first
    for path, text in (("a.py", "x = 2\n"), ("targets/_runner.c", "int f(void) { return 2; }\n")):
        (package / path).write_text(text)
        assert source_digest(package) != first
        first = source_digest(package)
    (package / "targets" / "_runner.abi3.so").write_bytes(b"\x7fELF two")
    assert source_digest(package) != first
