"""A stateful property: however definitions, redefinitions and rebindings interleave with launches, a launch on
the CPU target computes what the same kernel computes when run as plain Python on the host -- no launch ever
runs stale code.

Each run gets a fresh module holding generic functions f0..f2 (each starting with one method on od.Any, so
every call has a method), plain helpers h0, h1, integer globals G0, G1, and a kernel that writes every
f_i(7), f_i(2.5) and h_k(7) into an int64 array. Rules rewrite that module's source; the launch rule runs the
kernel on the CPU target and as plain Python on the host (generic functions are callable on the host) and
compares the arrays, and both with an independent model of the module (the host run shares overdub's dispatch
cache, so it alone would not notice a stale dispatch answer). Calls only go from f_i to f_j with j > i, so no
definition creates a cycle.
"""
import textwrap

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

import overdub as od

from helpers import unique_name

N_FUNCTIONS, N_HELPERS, N_GLOBALS = 3, 2, 2
ARGUMENTS = {"int": "7", "float": "2.5"}
SIGNATURES = ["od.Any", "od.Number", "od.Integer", "od.int64", "od.Float", "od.float64"]
BELOW = {   # the signatures strictly more specific than each one
    "od.Any": ["od.Number", "od.Integer", "od.int64", "od.Float", "od.float64"],
    "od.Number": ["od.Integer", "od.int64", "od.Float", "od.float64"],
    "od.Integer": ["od.int64"],
    "od.Float": ["od.float64"],
    "od.int64": [],
    "od.float64": [],
}
CALLS = [f"f{i}({arg})" for i in range(N_FUNCTIONS) for arg in ARGUMENTS.values()] + \
        [f"h{k}({ARGUMENTS['int']})" for k in range(N_HELPERS)]

constants = st.integers(-5, 5)


def method_bodies(i: int):
    """What a method of f_i returns: a constant, a call of a later f, a helper call, or a global."""
    options = [constants.map(str),
               st.builds("h{}(x) + {}".format, st.integers(0, N_HELPERS - 1), constants),
               st.builds("G{} + {}".format, st.integers(0, N_GLOBALS - 1), constants)]
    if i + 1 < N_FUNCTIONS:
        options.append(st.builds("f{}(x) + {}".format, st.integers(i + 1, N_FUNCTIONS - 1), constants))
    return st.one_of(options)


helper_bodies = st.one_of(constants.map(str),
                          st.builds("x + {}".format, constants),
                          st.builds("G{} * {}".format, st.integers(0, N_GLOBALS - 1), constants))


def initial_source() -> str:
    lines = ["import overdub as od"]
    lines += [f"G{k} = 0" for k in range(N_GLOBALS)]
    lines += [f"def h{k}(x):\n    return 0" for k in range(N_HELPERS)]
    lines += [f"@od.function\ndef f{i}(x: od.Any):\n    return 0" for i in range(N_FUNCTIONS)]
    lines += ["def kernel(out):\n" + "".join(f"    out[{n}] = {call}\n" for n, call in enumerate(CALLS))]
    return "\n\n".join(lines) + "\n"


class Model:
    """The specification, independent of overdub's caches: every method's signature and body, every helper's
    body and every global's value, with dispatch computed afresh (the most specific applicable signature)."""

    def __init__(self):
        self.methods = {i: {"od.Any": "0"} for i in range(N_FUNCTIONS)}
        self.helpers = {k: "0" for k in range(N_HELPERS)}
        self.globals = {k: 0 for k in range(N_GLOBALS)}

    def dispatch(self, i: int, x):
        argtype = od.int64 if isinstance(x, int) else od.float64
        applicable = [s for s in self.methods[i] if od.issubtype(argtype, SIGNATURE_TYPES[s])]
        [best] = [s for s in applicable if all(od.issubtype(SIGNATURE_TYPES[s], SIGNATURE_TYPES[o])
                                                for o in applicable)]
        return self.methods[i][best]

    def results(self) -> list:
        env = {f"G{k}": v for k, v in self.globals.items()}
        env.update({f"h{k}": eval(f"lambda x: {body}", env) for k, body in self.helpers.items()})
        for i in range(N_FUNCTIONS):
            env[f"f{i}"] = (lambda i: lambda x: eval(self.dispatch(i, x), env, {"x": x}))(i)
        return [int(eval(call, env)) for call in CALLS]      # int(): the int64 store truncates


SIGNATURE_TYPES = {s: eval(s, {"od": od}) for s in SIGNATURES}


class NothingStale(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.name = unique_name("stateful")
        self.namespace = {"__name__": self.name}
        self.chunks = 0
        self.run(initial_source())
        self.model = Model()

    def run(self, source: str) -> None:
        self.chunks += 1
        exec(compile(textwrap.dedent(source), f"<{self.name} chunk {self.chunks}>", "exec"), self.namespace)

    def define(self, i: int, signature: str, body: str) -> None:
        self.run(f"@od.function\ndef f{i}(x: {signature}):\n    return {body}\n")
        self.model.methods[i][signature] = body

    @rule(data=st.data(), i=st.integers(0, N_FUNCTIONS - 1), signature=st.sampled_from(SIGNATURES))
    def define_or_redefine_method(self, data, i, signature):
        self.define(i, signature, data.draw(method_bodies(i), label="body"))

    @rule(data=st.data(), i=st.integers(0, N_FUNCTIONS - 1))
    def add_more_specific_method(self, data, i):
        defined = self.model.methods[i]
        candidates = sorted({s for existing in defined for s in BELOW[existing]} - defined.keys())
        if candidates:
            signature = data.draw(st.sampled_from(candidates), label="signature")
            self.define(i, signature, data.draw(method_bodies(i), label="body"))

    @rule(k=st.integers(0, N_GLOBALS - 1), value=constants)
    def rebind_global(self, k, value):
        self.run(f"G{k} = {value}")
        self.model.globals[k] = value

    @rule(k=st.integers(0, N_HELPERS - 1), body=helper_bodies)
    def define_helper(self, k, body):
        self.run(f"def h{k}(x):\n    return {body}\n")
        self.model.helpers[k] = body

    @rule()
    def launch(self):
        kernel = self.namespace["kernel"]
        on_cpu, on_host = np.zeros((2, len(CALLS)), dtype=np.int64)
        od.cuda(kernel, on_cpu)
        kernel(on_host)
        expected = self.model.results()
        assert on_cpu.tolist() == on_host.tolist() == expected, \
            f"calls {CALLS}: CPU target {on_cpu.tolist()}, host {on_host.tolist()}, model {expected}"


NothingStale.TestCase.settings = settings(max_examples=20, stateful_step_count=10, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
test_launches_never_run_stale_code = NothingStale.TestCase
