"""Several GPUs, tested on one: two CUDA contexts on the same device behave like two devices for loading (a
function loaded in one context cannot be launched in the other), so per-context loading, the launch table
and thread-local devices are tested on the single H200; per-architecture code is checked without a GPU."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

import overdub as od
from overdub.targets import cuda as cuda_target
from overdub.targets import get_target

SOURCE = """
from numba import cuda

def kernel(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + 1.0
"""


def test_each_architecture_gets_its_own_code(make_module):
    m = make_module(SOURCE)
    types = (numba.float64[:], numba.float64[:], numba.float64)
    sm80 = od.code_ptx(m.kernel, *types, cc=(8, 0))
    sm90 = od.code_ptx(m.kernel, *types, cc=(9, 0))
    sm90a = od.code_ptx(m.kernel, *types, cc=(9, 0, "a"))
    assert ".target sm_80" in sm80 and ".target sm_90\n" in sm90 and ".target sm_90a" in sm90a
    assert od.stats()["compiles"] == 3  # sm_90a is an architecture of its own, not sm_90's code


def test_the_device_names_the_architecture_of_reflections(make_module):
    m = make_module(SOURCE)
    types = (numba.float64[:], numba.float64[:], numba.float64)
    with pytest.raises(TypeError, match=r"cc= .* or device= .*, not both"):
        od.code_ptx(m.kernel, *types, cc=(8, 0), device=0)
    with pytest.raises(ValueError, match=r"od.code_\*\(device=7\): this machine has"):
        od.code_ptx(m.kernel, *types, device=7)
    assert od.code_ptx(m.kernel, *types) == od.code_ptx(m.kernel, *types, cc=cuda_target.device_cc())


@pytest.mark.gpu
def test_a_launch_compiles_for_the_current_devices_architecture(cupy, make_module):
    """The CUDA target a launch compiles for is the current device's (each device of a machine mixing
    architectures gets code it can load): here the H200's, asked of the driver, as od.code_ptx(device=0)."""
    m = make_module(SOURCE)
    x, out = cupy.arange(16, dtype=np.float64), cupy.zeros(16)
    od.cuda(m.kernel, out, x, 3.0, blocks=1, threads=16, target="cuda")
    major, minor = cupy.cuda.Device(0).compute_capability
    assert cuda_target.device_cc(0) == (int(major), int(minor)) == cuda_target.device_cc()
    assert get_target("cuda").cc == cuda_target.device_cc(0)
    assert f".target sm_{major}{minor}" in od.code_ptx(m.kernel, out, x, 3.0, device=0)


def test_synchronize_on_the_cpu_target_takes_its_one_device():
    od.synchronize("cpu", device=0)
    od.synchronize("cpu", device="all")
    with pytest.raises(ValueError, match="one device"):
        od.synchronize("cpu", device=1)


# --- on the GPU: a second context on the same device -------------------------------------------------------


class SecondContext:
    """A CUDA context of device 0 other than its primary one (``cuCtxCreate``), with cupy allocating in
    whichever context is current (its memory pool off: a pooled block would belong to the primary context).
    cupy's own kernels are loaded in the primary context only: in this one, arrays are filled by copies."""

    def __init__(self):
        from cuda.bindings import driver

        self.driver = driver
        err, device = driver.cuDeviceGet(0)
        assert not err
        try:  # CUDA 13's signature: (params, flags, device)
            err, self.context = driver.cuCtxCreate(None, 0, device)
        except TypeError:  # CUDA 12's: (flags, device)
            err, self.context = driver.cuCtxCreate(0, device)
        assert not err, err
        driver.cuCtxPopCurrent()  # cuCtxCreate made it current

    def __enter__(self):
        (err,) = self.driver.cuCtxPushCurrent(self.context)
        assert not err
        return self

    def __exit__(self, *exc):
        self.driver.cuCtxPopCurrent()

    def destroy(self):
        self.driver.cuCtxDestroy(self.context)


def on_device(cupy, values):
    """A device array of ``values`` made without launching a cupy kernel (any context)."""
    array = cupy.empty(len(values), dtype=np.float64)
    array.set(np.asarray(values, dtype=np.float64))
    return array


def arange_and_zeros_in(context, cupy, n):
    """``arange(n)`` and ``zeros(n)``, device arrays made in ``context`` (entered and left) without a cupy kernel."""
    with context:
        return on_device(cupy, np.arange(n)), on_device(cupy, np.zeros(n))


@pytest.fixture
def second_context(cupy):
    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(None)  # plain cudaMalloc, in the current context
    od.synchronize("cuda")
    context = SecondContext()
    yield context
    od.synchronize("cuda")
    context.destroy()
    cupy.cuda.set_allocator(previous)


@pytest.mark.gpu
def test_a_kernel_first_launched_in_one_context_runs_in_another(cupy, make_module, second_context):
    m = make_module(SOURCE)
    x = cupy.arange(64, dtype=np.float64)
    out = cupy.zeros(64)
    od.cuda(m.kernel, out, x, 2.0, blocks=1, threads=64, target="cuda")
    with second_context:
        x2, out2 = on_device(cupy, np.arange(64)), on_device(cupy, np.zeros(64))
        od.cuda(m.kernel, out2, x2, 3.0, blocks=1, threads=64, target="cuda")
        od.synchronize("cuda")
        assert out2.get().tolist() == (3.0 * np.arange(64) + 1.0).tolist()
    assert out.get().tolist() == (2.0 * np.arange(64) + 1.0).tolist()
    assert od.stats()["compiles"] == 1  # one architecture: one compile, loaded in each context


@pytest.mark.gpu
def test_a_thousand_launches_alternating_between_two_contexts(cupy, make_module, second_context):
    m = make_module(SOURCE)
    x, out = cupy.arange(256, dtype=np.float64), cupy.zeros(256)
    x2, out2 = arange_and_zeros_in(second_context, cupy, 256)
    for i in range(1000):
        if i % 2:
            with second_context:
                od.cuda(m.kernel, out2, x2, float(i), blocks=2, threads=128, target="cuda")
        else:
            od.cuda(m.kernel, out, x, float(i), blocks=2, threads=128, target="cuda")
    with second_context:
        od.synchronize("cuda")
        assert np.array_equal(out2.get(), 999.0 * np.arange(256) + 1.0)
    od.synchronize("cuda")
    assert np.array_equal(out.get(), 998.0 * np.arange(256) + 1.0)
    assert od.stats()["compiles"] == 1


@pytest.mark.gpu
def test_host_threads_each_with_its_own_context_launch_concurrently(cupy, make_module, second_context):
    m = make_module(SOURCE)
    x, out = cupy.arange(128, dtype=np.float64), cupy.zeros(128)
    x2, out2 = arange_and_zeros_in(second_context, cupy, 128)
    failures = []

    def work(context, out, x, a):
        try:
            if context is not None:
                context.__enter__()
            for _ in range(500):
                od.cuda(m.kernel, out, x, a, blocks=1, threads=128, target="cuda")
            od.synchronize("cuda")
            if not np.array_equal(out.get(), a * np.arange(128) + 1.0):
                failures.append(f"context {context}: wrong result")
        except Exception as exc:  # reported below
            failures.append(repr(exc))
        finally:
            if context is not None:
                context.__exit__()

    threads = [
        threading.Thread(target=work, args=(None, out, x, 5.0)),
        threading.Thread(target=work, args=(second_context, out2, x2, 7.0)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


@pytest.mark.gpu
def test_contexts_made_and_destroyed_one_after_another_each_run_the_kernel(cupy, make_module):
    """The driver may give a new context the address of one destroyed before: the kernel's function there is the
    new context's, not the one the launch function kept for that address. The kernel is first launched in a
    context that is not the device's primary one (numba-cuda loads code in a primary context only)."""
    m = make_module(SOURCE)
    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(None)
    addresses = []
    try:
        for round in range(12):
            context = SecondContext()
            addresses.append(int(context.context))
            x, out = arange_and_zeros_in(context, cupy, 64)
            with context:
                od.cuda(m.kernel, out, x, float(round), blocks=1, threads=64, target="cuda")
                od.synchronize("cuda")
                assert np.array_equal(out.get(), round * np.arange(64) + 1.0), (round, addresses)
                del x, out  # freed in their context, before it goes
            context.destroy()
    finally:
        cupy.cuda.set_allocator(previous)


@pytest.mark.gpu
def test_a_thread_whose_first_launch_is_in_a_context_of_its_own_keeps_that_context(cupy, make_module, second_context):
    """A new host thread pushes a context of its own and launches (compiling and loading on that thread): the
    context stays current -- making the primary one current there launched with the other context's memory,
    an illegal address (the cause, by reading, of the concurrent test's failures above on an H100)."""
    from cuda.bindings import driver

    m = make_module(SOURCE)
    x2, out2 = arange_and_zeros_in(second_context, cupy, 64)
    seen = []

    def work():
        with second_context:
            od.cuda(m.kernel, out2, x2, 3.0, blocks=1, threads=64, target="cuda")
            od.synchronize("cuda")
            seen.append(int(driver.cuCtxGetCurrent()[1]))
            seen.append(out2.get().tolist())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [int(second_context.context), (3.0 * np.arange(64) + 1.0).tolist()]


@pytest.mark.gpu
def test_synchronize_a_device_and_every_device(cupy, make_module):
    m = make_module(SOURCE)
    x, out = cupy.arange(32, dtype=np.float64), cupy.zeros(32)
    od.cuda(m.kernel, out, x, 4.0, blocks=1, threads=32, target="cuda")
    od.synchronize("cuda", device=0)
    od.synchronize("cuda", device="all")
    assert out.get().tolist() == (4.0 * np.arange(32) + 1.0).tolist()
    with pytest.raises(ValueError, match="devices 0"):
        od.synchronize("cuda", device=99)


def test_a_launch_on_device_zero_of_the_cpu_target_and_a_clear_error_for_another(make_module):
    m = make_module(SOURCE)
    x, out = np.arange(8.0), np.zeros(8)
    od.cuda(m.kernel, out, x, 2.0, blocks=1, threads=8, target="cpu", device=0)
    assert out.tolist() == (2.0 * np.arange(8.0) + 1.0).tolist()
    with pytest.raises(ValueError, match=r"od.cuda\(device=1\): the CPU target has one device, 0"):
        od.cuda(m.kernel, out, x, 2.0, blocks=1, threads=8, target="cpu", device=1)


@pytest.mark.gpu
def test_a_launch_on_an_explicit_device(cupy, make_module):
    m = make_module(SOURCE)
    x, out = cupy.arange(16, dtype=np.float64), cupy.zeros(16)
    od.cuda(m.kernel, out, x, 3.0, blocks=1, threads=16, target="cuda", device=0)
    od.synchronize("cuda", device=0)
    assert out.get().tolist() == (3.0 * np.arange(16) + 1.0).tolist()
    with pytest.raises(ValueError, match="devices 0"):
        od.cuda(m.kernel, out, x, 3.0, blocks=1, threads=16, target="cuda", device=99)


@pytest.mark.gpu
def test_a_launch_on_a_stream_of_another_context_runs_in_that_context(cupy, make_module, second_context):
    """kernel[blocks, threads, stream] and od.cuda(..., stream=) run on the stream's device: the stream's
    context is made current for the launch (by the native launch function itself), and the thread's own
    context is current again afterwards; with device= naming another device, a stream of another context is
    a ValueError naming both. (A checked kernel cannot run in this test's second context: numba-cuda reads
    its error codes, and refuses a context other than a device's primary one.)"""
    m = make_module(SOURCE)
    x, out = cupy.arange(64, dtype=np.float64), cupy.zeros(64)
    od.cuda(m.kernel, out, x, 2.0, blocks=1, threads=64, target="cuda")  # loaded in the primary context
    with second_context:
        err, handle = second_context.driver.cuStreamCreate(0)
        assert not err
        x2, out2 = on_device(cupy, np.arange(64)), on_device(cupy, np.zeros(64))
    stream = cupy.cuda.ExternalStream(int(handle))
    kernel = od.jit(m.kernel)
    try:
        for a in (5.0, 6.0):
            od.cuda(m.kernel, out2, x2, a, blocks=1, threads=64, stream=stream, target="cuda")
            kernel[1, 64, stream](out2, x2, a + 10.0)
            assert int(second_context.driver.cuCtxGetCurrent()[1]) != int(second_context.context)
        with second_context:
            second_context.driver.cuStreamSynchronize(handle)
            assert out2.get().tolist() == (16.0 * np.arange(64) + 1.0).tolist()
        with pytest.raises(ValueError, match=r"od.cuda\(device=0\): the stream belongs to device 0's context"):
            od.cuda(m.kernel, out, x, 5.0, blocks=1, threads=64, stream=stream, target="cuda", device=0)
    finally:
        with second_context:
            second_context.driver.cuStreamDestroy(handle)
    od.cuda(m.kernel, out, x, 3.0, blocks=1, threads=64, target="cuda")  # the primary context's launch
    od.synchronize("cuda")
    assert out.get().tolist() == (3.0 * np.arange(64) + 1.0).tolist()
    assert od.stats()["compiles"] == 1  # one architecture, one compile: loaded in each context
