"""Generic functions, methods and contexts pickle by reference; errors pickle with all their fields; a spawned
worker launches kernels and its errors reach the parent intact."""

import multiprocessing
import pickle

import numpy as np
import pytest

import overdub as od
import picklable


def roundtrip(value):
    return pickle.loads(pickle.dumps(value))


def test_a_generic_function_a_method_and_a_context_pickle_by_reference():
    assert roundtrip(picklable.scale) is picklable.scale
    method = od.which(picklable.scale, od.float64)
    assert roundtrip(method) is method
    assert roundtrip(picklable.doubling) is picklable.doubling
    assert roundtrip(od.CUDA) is od.CUDA and roundtrip(od.Integer) is od.Integer


def test_a_context_still_pickles_after_a_launch_in_it():
    out = np.zeros(1)
    od.cuda(picklable.kernel, out, 3, context=picklable.doubling, target="cpu")
    assert out[0] == 12 and roundtrip(picklable.doubling) is picklable.doubling


def test_a_generic_function_that_no_name_finds_pickles_by_its_origin_and_comes_back_as_itself():
    def make():
        @od.function
        def local(x):
            return x

        return local

    local = make()
    assert roundtrip(local) is local and roundtrip(local)(3) == 3


def test_a_method_error_pickles_with_its_fields():
    with pytest.raises(od.MethodError) as caught:
        picklable.scale("text")
    error = caught.value
    error.call_site = "kernel.py:3"
    copy = roundtrip(error)
    assert (type(copy), copy.name, copy.argtypes, copy.call_site) == (
        od.MethodError,
        "scale",
        error.argtypes,
        "kernel.py:3",
    )
    assert copy.candidates == error.candidates and str(copy) == str(error)


def test_an_ambiguity_error_pickles_as_itself():
    f = od.GenericFunction("f")
    f.define(lambda x, y: 1, sig=(od.Integer, od.Number))
    f.define(lambda x, y: 2, sig=(od.Number, od.Integer))
    with pytest.raises(od.AmbiguityError) as caught:
        f(1, 1)
    copy = roundtrip(caught.value)
    assert type(copy) is od.AmbiguityError and str(copy) == str(caught.value)


def test_a_pointer_refuses_to_pickle_its_address():
    with pytest.raises(TypeError, match="address in this process"):
        pickle.dumps(od.pointer(np.zeros(3)))


def test_a_spawned_worker_launches_kernels_and_its_method_error_reaches_the_parent_intact():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(picklable.launch_in_worker, (3,)) == 6.0
        assert pool.apply(picklable.launch_in_worker, (3.0,)) == 1.5
        with pytest.raises(od.MethodError) as caught:
            pool.apply(picklable.launch_in_worker, (1j,))
    assert "no method matching scale(complex128)" in str(caught.value)
    assert caught.value.call_site and "picklable.py" in caught.value.call_site
    assert od.which(picklable.scale, od.int64) in caught.value.candidates


def test_the_array_and_pointer_patterns_pickle_as_themselves():
    """Annotations shipped to another process (overdub.travel) keep meaning od.Array and od.Ptr."""
    assert roundtrip(od.Array) is od.Array and roundtrip(od.Ptr) is od.Ptr
    assert roundtrip(od.Array[od.Float, 2]) == od.Array[od.Float, 2]
