"""Bad input gets a clear error before anything is compiled, saying what is wrong and what to do."""

import functools
from typing import ClassVar

import numpy as np
import pytest
from numba import cuda

import overdub as od
from helpers import compiles
from overdub import targets
from overdub.runtime import runtime


def kernel(out):
    out[0] = 1


@pytest.mark.parametrize(
    "not_a_kernel, hint",
    [
        (42, "a def"),
        (functools.partial(kernel), "bound arguments"),
        (od.GenericFunction("g"), "device function"),
        (np.zeros, "a def"),
    ],
)
def test_launching_something_that_is_not_a_kernel_def_says_so(not_a_kernel, hint):
    before = compiles()
    with pytest.raises(TypeError, match=hint):
        od.cuda(not_a_kernel, np.zeros(1))
    assert compiles() == before


@pytest.mark.parametrize("args", [(), (np.zeros(1), np.zeros(1))])
def test_the_wrong_number_of_arguments_names_the_kernels_parameters(args):
    before = compiles()
    with pytest.raises(TypeError, match=r"kernel\(out\) cannot take the \d argument"):
        od.cuda(kernel, *args)
    assert compiles() == before


@pytest.mark.parametrize("threads", [True, 2.0, 0, -1, (1, 2, 3, 4), "8", (2, False)])
def test_bad_launch_dimensions_are_rejected(threads):
    before = compiles()
    with pytest.raises(ValueError, match="positive integer"):
        od.cuda(kernel, np.zeros(1, dtype=np.int64), threads=threads)
    assert compiles() == before


def counts(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] += 1


BAD_CONFIGURATIONS = [
    (dict(threads=2.0), ValueError, r"threads must be a positive integer .* not 2\.0"),
    (dict(blocks=(2, 0)), ValueError, r"blocks must be a positive integer .* not \(2, 0\)"),
    (dict(threads=2048), ValueError, r"threads=2048 exceeds CUDA's limits"),
    (dict(blocks=(1, 70000)), ValueError, r"blocks=\(1, 70000\) exceeds CUDA's limits"),
    (dict(shmem=2.0), ValueError, r"shmem must be a non-negative integer .* not 2\.0"),
    (dict(shmem=-8), ValueError, r"shmem must be a non-negative integer .* not -8"),
    (dict(shmem=True), ValueError, r"shmem must be a non-negative integer .* not True"),
    (dict(shmem=1 << 20), ValueError, r"shmem=1048576 exceeds CUDA's limit of 49152 bytes"),
    (dict(stream="default"), TypeError, r"stream= takes a cupy, numba or cuda.core stream, not str"),
]


def _launch_counts(out, **config):
    od.cuda(counts, out, **({"threads": 8, "target": "cpu"} | config))


@pytest.mark.parametrize("cache", ["off", "cold", "warm"])
@pytest.mark.parametrize("config, error, message", BAD_CONFIGURATIONS)
def test_a_bad_launch_configuration_is_refused_before_anything_compiles_or_loads(
    config, error, message, cache, monkeypatch
):
    if cache == "off":
        monkeypatch.setenv("OVERDUB_CACHE", "0")
    out = np.zeros(8, dtype=np.int64)
    if cache == "warm":  # the kernel is in the disk cache, and nothing in memory: a new process
        _launch_counts(out)
        runtime.reset()
        out[:] = 0
    before = od.stats()
    with pytest.raises(error, match=message):
        _launch_counts(out, **config)
    after = od.stats()
    assert [after[k] - before[k] for k in ("compiles", "disk_hits", "disk_misses", "launches")] == [0, 0, 0, 0]
    assert not out.any()


@pytest.mark.parametrize("config, error, message", BAD_CONFIGURATIONS)
def test_a_bad_launch_configuration_gets_the_same_refusal_from_the_launch_table(config, error, message):
    out = np.zeros(8, dtype=np.int64)
    _launch_counts(out)  # the launch table now holds a launch function for these arguments
    with pytest.raises(error, match=message):
        _launch_counts(out, **config)
    assert out.tolist() == [1] * 8


def test_shmem_takes_numpy_integers_as_the_grid_does():
    out = np.zeros(8, dtype=np.int64)
    for shmem in (np.int64(64), np.uint32(0), 64, np.int32(49152)):
        _launch_counts(out, shmem=shmem)
    assert out.tolist() == [4] * 8


class _DeviceMemory:
    """Something in GPU memory, as the CPU target sees it (it speaks __cuda_array_interface__)."""

    __cuda_array_interface__: ClassVar[dict] = {"shape": (8,), "typestr": "<i8", "data": (0, False), "version": 3}


@pytest.mark.parametrize("cache", ["off", "cold", "warm"])
@pytest.mark.parametrize(
    "bad, message",
    [
        ([1, 2, 3], "a list .* cannot be a kernel argument"),
        (_DeviceMemory(), "lives in GPU memory"),
        (np.zeros(8, dtype=np.int64), "cannot take the 2 arguments"),
    ],
)
def test_an_argument_the_target_refuses_is_refused_before_anything_compiles_or_loads(bad, message, cache, monkeypatch):
    if cache == "off":
        monkeypatch.setenv("OVERDUB_CACHE", "0")
    if cache == "warm":
        _launch_counts(np.zeros(8, dtype=np.int64))
        runtime.reset()
    before = od.stats()
    args = (np.zeros(8, dtype=np.int64), bad) if isinstance(bad, np.ndarray) else (bad,)
    with pytest.raises((TypeError, ValueError), match=message):
        od.cuda(counts, *args, threads=8, target="cpu")
    after = od.stats()
    assert [after[k] - before[k] for k in ("compiles", "disk_hits", "disk_misses")] == [0, 0, 0]


def test_numpy_integers_are_launch_dimensions(make_module):
    m = make_module("""
        from numba import cuda

        def kernel(out):
            out[cuda.grid(1)] = 1
    """)
    out = np.zeros(16, dtype=np.int64)
    od.cuda(m.kernel, out, threads=np.int64(8), blocks=np.int32(2))
    assert out.sum() == 16
    out[:] = 0
    od.cuda(m.kernel, out, threads=(np.int64(4),), blocks=2)
    assert out.sum() == 8


def test_a_kernel_that_returns_a_value_is_rejected_on_every_target():
    def returning(out):
        out[0] = 1
        return out[0]

    for target in ("cpu", "cuda"):
        with pytest.raises(TypeError, match="returns a value"):
            od.cuda(returning, np.zeros(1), target=target)


def test_an_unknown_overdub_target_names_the_environment_variable(monkeypatch):
    monkeypatch.setenv("OVERDUB_TARGET", "bogus")
    with pytest.raises(ValueError, match="OVERDUB_TARGET is 'bogus': set it to 'cpu', 'cuda' or 'cuda-mlir'"):
        targets.default_target()


@pytest.mark.skipif(targets.gpu_usable(), reason="needs a machine without a usable GPU")
def test_the_cuda_target_without_a_gpu_suggests_the_cpu_target():
    with pytest.raises(RuntimeError, match="target='cpu'"):
        od.cuda(kernel, np.zeros(1), target="cuda")


@pytest.mark.parametrize("not_a_def", [int, len, np.sin, functools.partial(kernel)])
def test_od_function_on_anything_but_a_def_is_rejected_at_once(not_a_def):
    with pytest.raises(TypeError, match="takes a def"):
        od.function(not_a_def)


def test_overdubbing_a_class_says_it_is_a_class():
    with pytest.raises(TypeError, match="float is a class"):
        od.Context("c").overdub(float)


def test_overdubbing_a_targets_root_names_the_base_context_to_use():
    root = targets.get_target("cpu").root
    with pytest.raises(TypeError, match=r"add them to od.CPU"):
        root.overdub(print)


def test_a_pointer_to_a_strided_view_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        od.pointer(np.arange(10)[::2])
    assert od.pointer(np.zeros((3, 4), order="F")).dtype == np.float64


def test_a_kernel_with_keyword_only_or_variadic_parameters_is_refused_before_compiling():
    def keyword_only(out, *, k=1):
        out[0] = k

    def variadic(out, *rest):
        out[0] = 1

    for bad in (keyword_only, variadic):
        with pytest.raises(TypeError, match="positional parameters only"):
            od.cuda(bad, np.zeros(1))


def increments(out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] += 1


@pytest.mark.parametrize(
    "bad, message",
    [
        ([1, 2, 3], "a list .* cannot be a kernel argument: pass a numpy"),
        ({1, 2}, "a set .* cannot be a kernel argument"),
        (object(), "Cannot determine Numba type"),
    ],
)
def test_an_argument_no_kernel_can_take_is_refused_naming_the_kernel_and_its_parameter(bad, message):
    with pytest.raises((TypeError, ValueError), match=f"increments, parameter 'out': {message}"):
        od.cuda(increments, bad, 3, blocks=1, threads=4, target="cpu")
    out = np.zeros(4)  # and nothing is left broken
    od.cuda(increments, out, 3, blocks=1, threads=4, target="cpu")
    assert out.tolist() == [1, 1, 1, 0]


def test_the_cuda_target_refuses_python_containers_as_arguments_too():
    from overdub.targets import cuda as cuda_target

    with pytest.raises(TypeError, match=r"a list .* cannot be a kernel argument"):
        cuda_target.target_for((9, 0)).typeof([1.0, 2.0])


def test_an_array_in_the_other_byte_order_is_refused_naming_the_parameter_and_the_fix():
    """numba refuses it with a bare ``NumbaNotImplementedError: >f8``; overdub says what and how to convert."""
    big = np.arange(4, dtype=">f8")
    before = compiles()
    with pytest.raises(
        TypeError,
        match=r"kernel, parameter 'out': an array of >f8 is not in this machine's byte order.*newbyteorder\('='\)",
    ):
        od.cuda(kernel, big, target="cpu")
    assert compiles() == before
    od.cuda(kernel, big.astype(big.dtype.newbyteorder("=")), target="cpu")  # the fix it names works
