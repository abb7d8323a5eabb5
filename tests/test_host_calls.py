"""Host calls of a generic function: a fast path per argument classes, never stale."""

import threading

import numpy as np

import overdub as od
from helpers import fresh
from overdub.types import typeof


def test_a_repeated_host_call_reaches_the_method_its_types_dispatch_to():
    f = fresh()
    f.define(lambda x: "float", sig=(od.Float,))
    f.define(lambda x: "integer", sig=(od.Integer,))
    assert [f(1.0), f(1.0), f(2), f(3), f(np.float32(1))] == ["float", "float", "integer", "integer", "float"]


def test_a_method_defined_after_a_host_call_is_reached_by_the_next_call():
    f = fresh()
    f.define(lambda x: "any", sig=(od.Any,))
    assert f(1.0) == "any"
    f.define(lambda x: "float64", sig=(od.float64,))
    assert f(1.0) == "float64"


def test_a_redefined_method_is_called_after_its_replacement():
    f = fresh()
    f.define(lambda x: 1, sig=(od.Float,))
    assert f(1.0) == 1
    f.define(lambda x: 2, sig=(od.Float,))
    assert f(1.0) == 2


def test_an_int_beyond_int64_dispatches_on_its_own_type():
    f = fresh()
    f.define(lambda x: "int64", sig=(od.int64,))
    f.define(lambda x: "uint64", sig=(od.uint64,))
    assert [f(1), f(2**63), f(5)] == ["int64", "uint64", "int64"]


def test_an_array_of_another_dtype_rank_layout_or_writability_is_typed_again():
    f = fresh()
    f.define(lambda x: "float", sig=(od.Array[od.Float],))
    f.define(lambda x: "integer", sig=(od.Array[od.Integer],))
    f.define(lambda x: "matrix", sig=(od.Array[od.Float, 2],))
    readonly = np.zeros(3)
    readonly.flags.writeable = False
    f.define(lambda x: "readonly", sig=(typeof(readonly),))
    assert [f(np.zeros(3)), f(np.zeros(3, dtype=np.int32)), f(np.zeros((2, 2))), f(readonly), f(np.ones(2))] == [
        "float",
        "integer",
        "matrix",
        "readonly",
        "float",
    ]


def test_the_same_classes_in_two_positions_are_checked_each():
    f = fresh()
    f.define(lambda x, y: "ii", sig=(od.int64, od.int64))
    f.define(lambda x, y: "iu", sig=(od.int64, od.uint64))
    assert [f(1, 2), f(1, 2**63), f(3, 4)] == ["ii", "iu", "ii"]
    g = fresh()  # three ints, each checked: the last beyond int64 takes its own method
    g.define(lambda x, y, z: "iii", sig=(od.int64, od.int64, od.int64))
    g.define(lambda x, y, z: "iiu", sig=(od.int64, od.int64, od.uint64))
    assert [g(1, 2, 3), g(-(2**63), 2**63 - 1, 2**63), g(4, 5, 6)] == ["iii", "iiu", "iii"]


def test_a_call_with_no_applicable_method_raises_every_time():
    f = fresh()
    f.define(lambda x: 1, sig=(od.Float,))
    for _ in range(2):
        try:
            f("a")
        except od.MethodError as error:
            assert "no method matching" in str(error)
        else:
            raise AssertionError("no MethodError")


def test_host_calls_from_threads_during_redefinitions_never_reach_a_replaced_method():
    f = fresh()
    f.define(lambda x: 0, sig=(od.Float,))
    seen, stop = [[], []], threading.Event()

    def call(mine):
        while not stop.is_set():
            mine.append(f(1.0))

    workers = [threading.Thread(target=call, args=(mine,)) for mine in seen]
    for worker in workers:
        worker.start()
    for version in range(1, 50):
        f.define((lambda v: lambda x: v)(version), sig=(od.Float,))
        assert f(1.0) == version
    stop.set()
    for worker in workers:
        worker.join()
    assert f(1.0) == 49 and all(mine == sorted(mine) for mine in seen)


def test_datetimes_of_other_units_are_typed_again():
    f = fresh()
    day, second = np.datetime64("2020-01-01", "D"), np.datetime64("2020-01-01", "s")
    f.define(lambda x: "day", sig=(typeof(day),))
    f.define(lambda x: "second", sig=(typeof(second),))
    assert [f(day), f(second), f(day)] == ["day", "second", "day"]


def test_record_arrays_of_other_fields_are_typed_again():
    f = fresh()
    a = np.zeros(2, dtype=[("x", np.float64)])
    b = np.zeros(2, dtype=[("y", np.float64)])
    f.define(lambda v: "x", sig=(typeof(a),))
    f.define(lambda v: "y", sig=(typeof(b),))
    assert [f(a), f(b), f(a)] == ["x", "y", "x"]
