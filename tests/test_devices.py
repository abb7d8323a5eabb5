"""Several GPUs, tested on one: two CUDA contexts on the same device behave like two devices for loading (a
function loaded in one context cannot be launched in the other), so per-context loading, the launch table
and thread-local devices are tested on the single H200; per-architecture code is checked without a GPU."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

import overdub as od

SOURCE = """
from numba import cuda

def kernel(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + 1.0
"""


def test_each_architecture_gets_its_own_code(make_module):
    m = make_module(SOURCE)
    sm80 = od.code_ptx(m.kernel, numba.float64[:], numba.float64[:], numba.float64, cc=(8, 0))
    sm90 = od.code_ptx(m.kernel, numba.float64[:], numba.float64[:], numba.float64, cc=(9, 0))
    assert ".target sm_80" in sm80 and ".target sm_90" in sm90


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
    with second_context:
        x2, out2 = on_device(cupy, np.arange(256)), on_device(cupy, np.zeros(256))
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
    with second_context:
        x2, out2 = on_device(cupy, np.arange(128)), on_device(cupy, np.zeros(128))
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
def test_a_stream_of_another_context_is_a_clear_error_or_runs_right(cupy, make_module, second_context):
    """A stream made in one context, passed to a launch in another: the driver refuses it (a ValueError
    naming both contexts, not a bare CUDA error), or it runs the kernel right -- never wrong results."""
    m = make_module(SOURCE)
    x, out = cupy.arange(64, dtype=np.float64), cupy.zeros(64)
    od.cuda(m.kernel, out, x, 2.0, blocks=1, threads=64, target="cuda")  # loaded in the primary context
    with second_context:
        err, handle = second_context.driver.cuStreamCreate(0)
        assert not err
    stream = cupy.cuda.ExternalStream(int(handle))
    try:
        od.cuda(m.kernel, out, x, 5.0, blocks=1, threads=64, stream=stream, target="cuda")
    except ValueError as error:
        assert "stream belongs to device 0's context" in str(error) and "current on this thread" in str(error)
    else:
        with second_context:
            second_context.driver.cuStreamSynchronize(handle)
        assert out.get().tolist() == (5.0 * np.arange(64) + 1.0).tolist()
    finally:
        with second_context:
            second_context.driver.cuStreamDestroy(handle)
    od.cuda(m.kernel, out, x, 3.0, blocks=1, threads=64, target="cuda")  # the kernel still launches
    od.synchronize("cuda")
    assert out.get().tolist() == (3.0 * np.arange(64) + 1.0).tolist()
