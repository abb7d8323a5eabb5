"""Property tests: dispatch agrees with a brute-force oracle, and a definition invalidates exactly the cached
answers it changes."""

import numba
from hypothesis import given, settings
from hypothesis import strategies as st

import overdub as od
from overdub import world

SCALARS = [od.int32, od.int64, od.float32, od.float64, od.bool_]
ANNOTATIONS = [
    od.Any,
    od.Number,
    od.Integer,
    od.Float,
    od.Boolean,
    *SCALARS,
    od.Ptr[od.Any],
    od.Ptr[od.Integer],
    od.Ptr[od.Number],
    od.Ptr[od.int64],
    od.Ptr[od.float32],
    od.Array[od.Any],
    od.Array[od.Float],
    od.Array[od.Float, 1],
    od.Array[od.int64, 2],
]
CONCRETE = [
    *SCALARS,
    od.Ptr[od.int64],
    od.Ptr[od.float32],
    numba.types.Array(od.float32, 1, "C"),
    numba.types.Array(od.int64, 2, "A"),
]
QUERIES = [(t,) for t in CONCRETE] + [(a, b) for a in CONCRETE[:6] for b in CONCRETE[:6]]

signatures = st.integers(1, 2).flatmap(lambda n: st.tuples(*[st.sampled_from(ANNOTATIONS)] * n))


def oracle(methods, argtypes):
    """The specification, by brute force: the unique most specific applicable method, or why there is none."""
    applicable = [
        m for m in methods if len(m.sig) == len(argtypes) and all(od.issubtype(a, s) for a, s in zip(argtypes, m.sig))
    ]
    if not applicable:
        return "no method"

    def more_specific(m, o):
        return m.sig != o.sig and all(od.issubtype(x, y) for x, y in zip(m.sig, o.sig))

    best = [m for m in applicable if all(o is m or more_specific(m, o) for o in applicable)]
    if len(best) == 1:
        return best[0]
    # an ambiguity's answer is the set of equally specific candidates its error names
    return ("ambiguous", frozenset(id(m) for m in applicable if not any(more_specific(o, m) for o in applicable)))


def answer(f, argtypes):
    try:
        return od.which(f, *argtypes)
    except od.AmbiguityError as error:
        return ("ambiguous", frozenset(id(m) for m in error.candidates))
    except od.MethodError:
        return "no method"


def define_all(sigs):
    f = od.GenericFunction("f")
    for sig in sigs:
        f.define(_method(len(sig)), sig=sig)
    return f


def _method(arity):
    return (lambda x: 0) if arity == 1 else (lambda x, y: 0)


class Probe(world.Node):
    def __init__(self, argtypes):
        super().__init__()
        self.argtypes = argtypes


@settings(max_examples=200, deadline=None)
@given(st.lists(signatures, max_size=6))
def test_which_agrees_with_the_oracle(sigs):
    f = define_all(sigs)
    for argtypes in QUERIES:
        assert answer(f, argtypes) == oracle(f.methods, argtypes)
        assert answer(f, argtypes) == oracle(f.methods, argtypes)  # the cached answer too


@settings(max_examples=200, deadline=None)
@given(st.lists(signatures, max_size=6), signatures)
def test_a_definition_invalidates_exactly_the_answers_it_changes(sigs, new_sig):
    f = define_all(sigs)
    probes = {}
    for argtypes in QUERIES:
        probes[argtypes] = Probe(argtypes)
        with world.building(probes[argtypes]):
            before = answer(f, argtypes)
        probes[argtypes].before = before
    f.define(_method(len(new_sig)), sig=new_sig)
    for argtypes, probe in probes.items():
        after = oracle(f.methods, argtypes)
        assert answer(f, argtypes) == after
        changed = after is not probe.before if isinstance(after, od.Method) else after != probe.before
        assert probe.valid == (not changed), (argtypes, probe.before, after)
