"""Generic functions and multiple dispatch: definition, replacement, specificity, ambiguity, errors."""

import numpy as np
import pytest

import overdub as od
from helpers import fresh


def test_decorator_returns_the_same_generic_function_for_the_same_qualified_name():
    @od.function
    def g(x: int):
        return "int"

    first = g

    @od.function
    def g(x: float):
        return "float"

    assert g is first
    assert len(od.methods(g)) == 2


def test_same_signature_replaces_the_method():
    @od.function
    def h(x: int):
        return 1

    @od.function
    def h(x: int):  # noqa: F811 -- the redefinition is the behaviour under test
        return 2

    assert len(od.methods(h)) == 1
    assert h(3) == 2


def test_different_signature_adds_a_method():
    f = fresh()
    f.define(lambda x: "any")
    f.define(lambda x: "int", sig=(od.Integer,))
    assert len(od.methods(f)) == 2


def test_unannotated_parameters_are_any():
    f = fresh()
    m = f.define(lambda x, y: None)
    assert m.sig == (od.Any, od.Any)


def test_methods_list_signatures_and_locations():
    f = fresh()

    def body(x: od.Ptr[od.Integer], n: int):
        pass

    f.define(body)
    (m,) = od.methods(f)
    assert m.signature_repr() == "f(x: Ptr[Integer], n: Integer)"
    assert m.location == f"test_dispatch.py:{body.__code__.co_firstlineno}"


def test_more_specific_method_added_later_changes_only_affected_tuples():
    f = fresh()
    f.define(lambda x: "number", sig=(od.Number,))
    assert od.which(f, od.int64).sig == (od.Number,)
    assert od.which(f, od.float64).sig == (od.Number,)
    f.define(lambda x: "integer", sig=(od.Integer,))
    assert od.which(f, od.int64).sig == (od.Integer,)
    assert od.which(f, od.float64).sig == (od.Number,)


def test_ambiguity_is_an_error_until_resolved():
    f = fresh()
    f.define(lambda x, y: "a", sig=(od.Integer, od.Number))
    f.define(lambda x, y: "b", sig=(od.Number, od.Integer))
    with pytest.raises(od.AmbiguityError) as info:
        od.which(f, od.int64, od.int64)
    assert isinstance(info.value, od.MethodError) and isinstance(info.value, TypeError)
    message = str(info.value)
    assert "f(int64, int64) is ambiguous" in message
    assert "f(x: Integer, y: Number)" in message and "f(x: Number, y: Integer)" in message
    f.define(lambda x, y: "c", sig=(od.Integer, od.Integer))
    assert od.which(f, od.int64, od.int64).sig == (od.Integer, od.Integer)


def test_pointer_to_integer_is_more_specific_than_pointer_to_any():
    f = fresh()
    f.define(lambda p: "any", sig=(od.Ptr[od.Any],))
    f.define(lambda p: "int", sig=(od.Ptr[od.Integer],))
    assert od.which(f, od.Ptr[od.int64]).sig == (od.Ptr[od.Integer],)
    assert od.which(f, od.Ptr[od.float32]).sig == (od.Ptr[od.Any],)


def test_method_error_names_function_types_and_candidates():
    f = fresh("scale")
    f.define(lambda x: x, sig=(od.Integer,))
    f.define(lambda x: x, sig=(od.Array[od.Float, 1],))
    with pytest.raises(od.MethodError) as info:
        od.which(f, od.float32)
    message = str(info.value)
    assert "no method matching scale(float32)" in message
    assert "scale(x: Integer)" in message and "scale(x: Array[Float, 1])" in message
    assert not isinstance(info.value, od.AmbiguityError)


def test_method_error_for_wrong_arity():
    f = fresh()
    f.define(lambda x: x)
    with pytest.raises(od.MethodError, match=r"no method matching f\(int64, int64\)"):
        od.which(f, od.int64, od.int64)


def test_dispatch_results_are_cached_per_type_tuple():
    f = fresh()
    f.define(lambda x: x, sig=(od.Integer,))
    first = f.table.dispatch((od.int64,))
    assert f.table.dispatch((od.int64,)) is first
    assert f.table.dispatch((od.int32,)) is not first


def test_host_call_dispatches_on_numba_typeof():
    f = fresh()
    f.define(lambda x: "int", sig=(od.Integer,))
    f.define(lambda x: "float32", sig=(od.float32,))
    f.define(lambda x: "array", sig=(od.Array[od.Any, 1],))
    assert f(3) == "int"
    assert f(np.float32(1.5)) == "float32"
    assert f(np.zeros(3)) == "array"
    with pytest.raises(od.MethodError):
        f(1.5)


def test_trailing_defaults_define_one_method_per_arity():
    f = fresh()

    def body(x: int, y: int = 10, z: float = 0.5):
        return (x, y, z)

    f.define(body)
    assert sorted((m.sig for m in od.methods(f)), key=len) == sorted(
        [(od.Integer,), (od.Integer, od.Integer), (od.Integer, od.Integer, od.Float)], key=len
    )
    assert {m.location for m in od.methods(f)} == {f"test_dispatch.py:{body.__code__.co_firstlineno}"}
    assert f(1) == (1, 10, 0.5) and f(1, 2) == (1, 2, 0.5) and f(1, 2, 3.0) == (1, 2, 3.0)


def test_redefining_a_def_with_defaults_replaces_each_of_its_methods():
    f = fresh()
    f.define(lambda x, y=1: x + y)
    f.define(lambda x, y=2: x * y)
    assert len(od.methods(f)) == 2 and f(3) == 6


def test_varargs_and_keyword_only_parameters_are_rejected_with_a_clear_error():
    f = fresh()
    with pytest.raises(TypeError, match="not a positional parameter"):
        f.define(lambda *xs: xs)
    with pytest.raises(TypeError, match="not a positional parameter"):
        f.define(lambda x, *, y: x)
