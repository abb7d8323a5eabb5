"""World age, backedges and selective invalidation with a logged cause."""

import overdub as od
from helpers import fresh, in_threads
from overdub import world


class Dependent(world.Node):
    """A stand-in for a compiled thing (the compiler's kernels plug in the same way)."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def describe(self):
        return self.name


def build(name, *lookups):
    node = Dependent(name)
    with world.building(node):
        for table, argtypes in lookups:
            table.dispatch(argtypes)
    return node


def test_every_definition_bumps_the_world():
    f = fresh()
    before = od.current_world()
    f.define(lambda x: x)
    f.define(lambda x: x, sig=(od.Integer,))
    assert od.current_world() == before + 2


def test_replacing_a_method_invalidates_its_dependents_only():
    f, g = fresh("f"), fresh("g")
    f.define(lambda x: 1, sig=(od.Integer,))
    g.define(lambda x: 1, sig=(od.Integer,))
    uses_f = build("uses f", (f.table, (od.int64,)))
    uses_g = build("uses g", (g.table, (od.int64,)))
    f.define(lambda x: 2, sig=(od.Integer,))
    assert not uses_f.valid and uses_g.valid


def test_adding_a_more_specific_method_invalidates_only_the_tuples_it_wins():
    f = fresh()
    f.define(lambda x: 1, sig=(od.Number,))
    on_int = build("on int", (f.table, (od.int64,)))
    on_float = build("on float", (f.table, (od.float64,)))
    f.define(lambda x: 2, sig=(od.Integer,))
    assert not on_int.valid and on_float.valid


def test_a_method_that_makes_a_call_ambiguous_invalidates_it():
    f = fresh()
    f.define(lambda x, y: 1, sig=(od.Integer, od.Number))
    node = build("caller", (f.table, (od.int64, od.int64)))
    f.define(lambda x, y: 2, sig=(od.Number, od.Integer))
    assert not node.valid


def test_negative_answers_carry_backedges():
    f = fresh()
    node = build("caller of a missing method", (f.table, (od.float32,)))
    assert f.table.dispatch((od.float32,)).method is None
    f.define(lambda x: 1, sig=(od.Integer,))  # does not apply to float32
    assert node.valid
    f.define(lambda x: 1, sig=(od.Float,))  # now there is a method
    assert not node.valid


def test_invalidation_walks_backedges_transitively():
    f = fresh()
    f.define(lambda x: 1, sig=(od.Integer,))
    inner = build("inner", (f.table, (od.int64,)))
    outer = Dependent("outer")
    inner.add_backedge(outer)
    bystander = Dependent("bystander")
    f.define(lambda x: 2, sig=(od.Integer,))
    assert not inner.valid and not outer.valid and bystander.valid


def test_invalidation_is_logged_with_its_cause_and_location():
    f = fresh("doit")
    f.define(lambda p: 1, sig=(od.Ptr[od.int64],))
    build("kernel(Ptr[int64])", (f.table, (od.Ptr[od.int64],)))

    def doit(p: od.Ptr[od.int64]):
        return 2

    f.define(doit)
    entry = od.invalidation_log()[-1]
    assert entry.cause == f"doit(p: Ptr[int64]) redefined at test_world.py:{doit.__code__.co_firstlineno}"
    assert "kernel(Ptr[int64])" in entry.invalidated
    assert any("doit(Ptr[int64]) ->" in item for item in entry.invalidated)


def test_a_node_that_consults_a_stale_answer_is_born_invalid():
    f = fresh()
    f.define(lambda x: 1, sig=(od.Integer,))
    mi = f.table.dispatch((od.int64,))
    f.define(lambda x: 2, sig=(od.Integer,))
    late = Dependent("late")
    mi.add_backedge(late)
    assert not late.valid


def test_concurrent_definitions_and_dispatch_stay_consistent():
    f = fresh()
    f.define(lambda x: 0, sig=(od.Any,))
    types_ = [od.int8, od.int16, od.int32, od.int64, od.float32, od.float64]

    def method_returning(i):
        return lambda x: i

    def definer():
        for i, t in enumerate(types_):
            f.define(method_returning(i), sig=(t,))

    def reader():
        for _ in range(200):
            for t in types_:
                f.table.dispatch((t,))

    assert in_threads(lambda job: job(), [definer, reader, reader, reader]) == []
    for t in types_:  # every cached answer equals a fresh resolution
        assert f.table.dispatch((t,)).method is f.table.resolve((t,))[0]
        assert f.table.dispatch((t,)).method.sig == (t,)
