"""A stateful property: however definitions, redefinitions, rebindings and in-place edits interleave with launches,
a launch on the CPU target computes what the same kernel computes when run as plain Python on the host, and what an
independent model of the module says -- no launch ever runs stale code or values.

Each run gets a fresh module holding generic functions f0..f2 (each starting with one method on od.Any, so every
call has a method), a generic function fd(x, k=3) with a default, plain helpers h0, h1, integer globals G0, G1, a
float global GZ (0.0, -0.0, nan or 1.5), contexts pa, pb and ctx (whose parent is pa, pb or nothing), and a kernel
made by a factory, closing over a variable `captured`. The kernel writes every f_i(7), f_i(2.5), h_k(7), fd(7),
the sign and self-equality of GZ and `captured` into an int64 array. Rules rewrite the module's source, replace a
helper's code in place (as %autoreload does), set the captured variable (nonlocal), add overdubs to the contexts
and move ctx's parent. The launch rules run the kernel on the CPU target -- alone, in ctx, or from several
threads at once -- and compare with the host run and the model (the host run shares overdub's dispatch cache, so
it alone would not notice a stale dispatch answer; it knows nothing of contexts, so launches in ctx are compared
with the model alone). Calls only go from f_i to f_j with j > i, so no definition creates a cycle.

CI's full run (OVERDUB_FULL=1: the tests here are `model` tests) runs a few hundred steps; the slow test
(OVERDUB_SLOW=1) at least 10^4.
"""

import linecache
import math
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import overdub as od
from helpers import in_threads, unique_name

pytestmark = pytest.mark.model

N_FUNCTIONS, N_HELPERS, N_GLOBALS = 3, 2, 2
ARGUMENTS = {"int": "7", "float": "2.5"}
SIGNATURES = ["od.Any", "od.Number", "od.Integer", "od.int64", "od.Float", "od.float64"]
BELOW = {  # the signatures strictly more specific than each one
    "od.Any": ["od.Number", "od.Integer", "od.int64", "od.Float", "od.float64"],
    "od.Number": ["od.Integer", "od.int64", "od.Float", "od.float64"],
    "od.Integer": ["od.int64"],
    "od.Float": ["od.float64"],
    "od.int64": [],
    "od.float64": [],
}
CALLS = (
    [f"f{i}({arg})" for i in range(N_FUNCTIONS) for arg in ARGUMENTS.values()]
    + [f"h{k}({ARGUMENTS['int']})" for k in range(N_HELPERS)]
    + ["fd(7)", "math.copysign(1.0, GZ)", "GZ == GZ", "captured"]
)
FLOATS = ["0.0", "-0.0", "nan", "1.5"]
CONTEXTS = ["pa", "pb", "ctx"]

constants = st.integers(-5, 5)


def method_bodies(i: int):
    """What a method of f_i returns: a constant, a call of a later f, a helper call, or a global."""
    options = [
        constants.map(str),
        st.builds("h{}(x) + {}".format, st.integers(0, N_HELPERS - 1), constants),
        st.builds("G{} + {}".format, st.integers(0, N_GLOBALS - 1), constants),
    ]
    if i + 1 < N_FUNCTIONS:
        options.append(st.builds("f{}(x) + {}".format, st.integers(i + 1, N_FUNCTIONS - 1), constants))
    return st.one_of(options)


helper_bodies = st.one_of(
    constants.map(str),
    st.builds("x + {}".format, constants),
    st.builds("G{} * {}".format, st.integers(0, N_GLOBALS - 1), constants),
)


fd_bodies = st.sampled_from(["x + k", "x * k", "k - x", "2 * k"])


def initial_source() -> str:
    lines = ["import math\nimport overdub as od"]
    lines += [f"G{k} = 0" for k in range(N_GLOBALS)] + ["GZ = 0.0"]
    lines += [f"def h{k}(x):\n    return 0" for k in range(N_HELPERS)]
    lines += [f"@od.function\ndef f{i}(x: od.Any):\n    return 0" for i in range(N_FUNCTIONS)]
    lines += ["@od.function\ndef fd(x, k=3):\n    return x + k"]
    lines += ["pa = od.Context('pa')\npb = od.Context('pb')\nctx = od.Context('ctx', parent=pa)"]
    body = "".join(f"        out[{n}] = {call}\n" for n, call in enumerate(CALLS))
    lines += [
        "def make_kernel():\n    captured = 0\n\n    def kernel(out):\n"
        + body
        + "\n    def set_captured(value):\n        nonlocal captured\n        captured = value\n"
        "    return kernel, set_captured\n\n\nkernel, set_captured = make_kernel()"
    ]
    return "\n\n".join(lines) + "\n"


class Model:
    """The specification, independent of overdub's caches: every method's signature and body, every helper's
    body, every global's value, the captured variable, the contexts' overdubs and ctx's parent, with dispatch
    computed afresh (the most specific applicable signature; the first context of the chain with an overdub)."""

    def __init__(self):
        self.methods = {i: {"od.Any": "0"} for i in range(N_FUNCTIONS)}
        self.helpers = {k: "0" for k in range(N_HELPERS)}
        self.globals = {k: 0 for k in range(N_GLOBALS)}
        self.gz, self.captured = "0.0", 0
        self.fd = {"any": "x + k"}  # the bodies of fd(x, k) on (Any, Any) and on (Integer, Integer)
        self.overdubs: dict[tuple[str, int], int] = {}  # (context, helper) -> the constant it returns
        self.parent = "pa"

    def dispatch(self, i: int, x):
        argtype = od.int64 if isinstance(x, int) else od.float64
        applicable = [s for s in self.methods[i] if od.issubtype(argtype, SIGNATURE_TYPES[s])]
        [best] = [
            s for s in applicable if all(od.issubtype(SIGNATURE_TYPES[s], SIGNATURE_TYPES[o]) for o in applicable)
        ]
        return self.methods[i][best]

    def helper(self, k: int, env: dict, context: str | None):
        chain = [] if context is None else [c for c in (context, self.parent) if c is not None]
        for name in chain:
            if (name, k) in self.overdubs:
                return (lambda value: lambda x: value)(self.overdubs[(name, k)])
        return eval(f"lambda x: {self.helpers[k]}", env)

    def results(self, context: str | None = None) -> list:
        env = {f"G{k}": v for k, v in self.globals.items()}
        env.update(GZ=float(self.gz), captured=self.captured, math=math)
        env.update({f"h{k}": self.helper(k, env, context) for k in range(N_HELPERS)})
        for i in range(N_FUNCTIONS):
            env[f"f{i}"] = (lambda j: lambda x: eval(self.dispatch(j, x), env, {"x": x}))(i)
        env["fd"] = lambda x, k=3: eval(self.fd.get("int", self.fd["any"]), env, {"x": x, "k": k})
        return [int(eval(call, env)) for call in CALLS]  # int(): the int64 store truncates


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
        source, filename = textwrap.dedent(source), f"<{self.name} chunk {self.chunks}>"
        # registered as IPython registers a cell's source, so closure kernels can be lifted (overdub.closures)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), self.namespace)

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

    @rule(k=st.integers(0, N_HELPERS - 1), body=helper_bodies)
    def replace_helper_code_in_place(self, k, body):
        self.run(f"def replacement(x):\n    return {body}\n\nh{k}.__code__ = replacement.__code__\n")
        self.model.helpers[k] = body

    @rule(value=st.sampled_from(FLOATS))
    def rebind_float_global(self, value):
        self.run(f"GZ = float('{value}')")
        self.model.gz = value

    @rule(value=constants)
    def set_captured_variable(self, value):
        self.namespace["set_captured"](value)
        self.model.captured = value

    @rule(body=fd_bodies, on_integers=st.booleans())
    def redefine_the_full_arity_of_fd(self, body, on_integers):
        signature = "x: od.Integer, k: od.Integer" if on_integers else "x, k"
        self.run(f"@od.function\ndef fd({signature}):\n    return {body}\n")
        self.model.fd["int" if on_integers else "any"] = body

    @rule(context=st.sampled_from(CONTEXTS), k=st.integers(0, N_HELPERS - 1), value=constants)
    def overdub_a_helper(self, context, k, value):
        self.run(f"@{context}.overdub(h{k})\ndef _(x):\n    return {value}\n")
        self.model.overdubs[(context, k)] = value

    @rule(parent=st.sampled_from(["pa", "pb", None]))
    def set_the_parent_of_ctx(self, parent):
        self.run(f"ctx.parent = {parent}")
        self.model.parent = parent

    @rule()
    def launch(self):
        kernel = self.namespace["kernel"]
        on_cpu, on_host = np.zeros((2, len(CALLS)), dtype=np.int64)
        od.cuda(kernel, on_cpu)
        kernel(on_host)
        expected = self.model.results()
        assert on_cpu.tolist() == on_host.tolist() == expected, (
            f"calls {CALLS}: CPU target {on_cpu.tolist()}, host {on_host.tolist()}, model {expected}"
        )

    @rule()
    def launch_in_the_context(self):
        out = np.zeros(len(CALLS), dtype=np.int64)
        od.cuda(self.namespace["kernel"], out, context=self.namespace["ctx"])
        expected = self.model.results("ctx")
        assert out.tolist() == expected, f"calls {CALLS} in ctx: CPU target {out.tolist()}, model {expected}"

    @rule()
    def launch_from_several_threads_at_once(self):
        outs = np.zeros((3, len(CALLS)), dtype=np.int64)
        errors = in_threads(lambda row: od.cuda(self.namespace["kernel"], row), outs)
        assert errors == [] and outs.tolist() == [self.model.results()] * 3

    @invariant()
    def count_steps(self):
        NothingStale.steps += 1


NothingStale.steps = 0
NothingStale.TestCase.settings = settings(
    max_examples=25, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_launches_never_run_stale_code = NothingStale.TestCase


@pytest.mark.slow
def test_ten_thousand_steps_never_run_stale_code():
    """The same machine for at least 10^4 steps (rules run), in rounds of 100 examples of up to 50 steps."""
    NothingStale.steps, rounds = 0, 0
    while NothingStale.steps < 10_000:
        rounds += 1
        run_state_machine_as_test(
            NothingStale,
            settings=settings(
                max_examples=100,
                stateful_step_count=50,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    print(f"{NothingStale.steps} steps in {rounds} rounds of 100 examples: no launch ran stale code")
