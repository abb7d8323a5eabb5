"""The dispatch type lattice: abstract nodes over numba's concrete types, Ptr and Array patterns."""

import numba
import pytest

import overdub as od
from overdub.types import as_type


@pytest.mark.parametrize("t", [od.int8, od.int16, od.int32, od.int64, od.uint8, od.uint16, od.uint32, od.uint64])
def test_machine_integers_are_integers_and_numbers(t):
    assert od.issubtype(t, od.Integer) and od.issubtype(t, od.Number) and od.issubtype(t, od.Any)
    assert not od.issubtype(t, od.Float)


@pytest.mark.parametrize("t", [od.float16, od.float32, od.float64])
def test_floats_are_floats_not_integers(t):
    assert od.issubtype(t, od.Float) and od.issubtype(t, od.Number)
    assert not od.issubtype(t, od.Integer)


def test_boolean_is_not_a_number():
    assert od.issubtype(od.bool_, od.Boolean)
    assert not od.issubtype(od.bool_, od.Number) and not od.issubtype(od.bool_, od.Integer)


def test_abstract_nodes_order_like_a_tree():
    assert od.issubtype(od.Integer, od.Number) and od.issubtype(od.Number, od.Any)
    assert not od.issubtype(od.Number, od.Integer)
    assert not od.issubtype(od.Integer, od.Float)
    assert not od.issubtype(od.Any, od.int64)


def test_python_annotations_mean_abstract_types():
    assert as_type(int) is od.Integer and as_type(float) is od.Float and as_type(bool) is od.Boolean


def test_unknown_annotation_is_rejected_with_a_clear_message():
    with pytest.raises(TypeError, match="not an overdub type"):
        as_type(str)


def test_ptr_of_concrete_is_the_concrete_pointer_type():
    assert isinstance(od.Ptr[od.int64], od.PtrType)
    assert od.Ptr[od.int64] == od.Ptr[od.int64]
    assert od.Ptr[od.int64] != od.Ptr[od.int32]


def test_ptr_is_covariant():
    assert od.issubtype(od.Ptr[od.int64], od.Ptr[od.Integer])
    assert od.issubtype(od.Ptr[od.Integer], od.Ptr[od.Any])
    assert od.issubtype(od.Ptr[od.Integer], od.Ptr[od.Number])
    assert not od.issubtype(od.Ptr[od.Any], od.Ptr[od.Integer])
    assert not od.issubtype(od.Ptr[od.float32], od.Ptr[od.Integer])
    assert not od.issubtype(od.Ptr[od.int64], od.int64)


def test_array_pattern_matches_every_layout_and_optional_ndim():
    for layout in "CFA":
        t = numba.types.Array(od.float32, 2, layout)
        assert od.issubtype(t, od.Array[od.float32, 2])
        assert od.issubtype(t, od.Array[od.Float])
        assert od.issubtype(t, od.Array)
        assert not od.issubtype(t, od.Array[od.float32, 1])
        assert not od.issubtype(t, od.Array[od.Integer])
    assert od.issubtype(od.Array[od.float32, 1], od.Array[od.Number, 1])
    assert not od.issubtype(od.Array[od.Number], od.Array[od.Number, 1])


def test_other_numba_types_are_leaves_below_any():
    t = numba.types.UniTuple(od.int64, 2)
    assert od.issubtype(t, od.Any) and not od.issubtype(t, od.Number)
