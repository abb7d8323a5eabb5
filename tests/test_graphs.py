"""od.graph(): launches captured once and replayed, never with stale code -- after a redefinition the replay
recompiles the invalidated kernel and puts its code in the graph; g.update(i, *args) gives a launch new
arguments. On the CPU target the graph records the launches and replays them; on the GPU it is a CUDA graph."""

import random

import numpy as np
import pytest

import overdub as od

SOURCE = """
import overdub as od
from numba import cuda

@od.function
def f(x):
    return x + 1.0

def scale(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = f(x[i]) * a

def add(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += x[i]
"""


def capture(m, out, tmp, x, target):
    with od.graph(target=target) as g:
        od.cuda(m.scale, tmp, x, 2.0, blocks=1, threads=32, target=target)
        od.cuda(m.scale, out, tmp, 3.0, blocks=1, threads=32, target=target)
        od.jit(m.add)[1, 32](out, x) if target is None else od.cuda(m.add, out, x, blocks=1, threads=32, target=target)
    return g


def expected(x, f, a=2.0, b=3.0):
    return f(f(x) * a) * b + x


def test_a_graph_on_the_cpu_target_records_the_launches_and_replays_them_with_the_current_code(make_module):
    m = make_module(SOURCE)
    x, tmp, out = np.arange(32.0), np.zeros(32), np.zeros(32)
    g = capture(m, out, tmp, x, "cpu")
    assert len(g.launches) == 3 and not out.any()  # captured, not run
    g.launch()
    assert np.array_equal(out, expected(x, lambda v: v + 1.0))
    m.run("""
        @od.function
        def f(x):
            return x * 10.0
    """)
    g.launch()
    assert np.array_equal(out, expected(x, lambda v: v * 10.0))
    g.update(1, out, tmp, 5.0)
    g.launch()
    assert np.array_equal(out, expected(x, lambda v: v * 10.0, b=5.0))


def test_a_graph_refuses_what_a_replay_cannot_honour_and_leaves_launching_as_it_was(make_module):
    m = make_module(SOURCE)
    x, out = np.arange(4.0), np.zeros(4)
    with pytest.raises(ValueError, match="stream=, device= or debug="), od.graph(target="cpu"):
        od.cuda(m.scale, out, x, 2.0, threads=4, target="cpu", debug=True)
    od.cuda(m.scale, out, x, 2.0, threads=4, target="cpu")  # not capturing any more: it runs
    assert out.tolist() == [2.0, 4.0, 6.0, 8.0]
    with od.graph(target="cpu") as g:
        with pytest.raises(RuntimeError, match="another graph is capturing"), od.graph(target="cpu"):
            pass
        with pytest.raises(RuntimeError, match="inside its own with block"):
            g.launch()
        with pytest.raises(TypeError, match="cannot take the 2 arguments"):
            od.cuda(m.scale, out, x, target="cpu")
    assert g.launches == []
    with pytest.raises(RuntimeError, match="captured already"), g:
        pass


@pytest.mark.gpu
def test_a_cuda_graph_replays_and_stays_right_across_redefinitions_and_updates(cupy, make_module):
    m = make_module(SOURCE)
    x, tmp, out = cupy.arange(32, dtype=np.float64), cupy.zeros(32), cupy.zeros(32)
    with od.graph(target="cuda") as g:
        od.cuda(m.scale, tmp, x, 2.0, blocks=1, threads=32, target="cuda")
        od.cuda(m.scale, out, tmp, 3.0, blocks=1, threads=32, target="cuda")
        od.jit(m.add)[1, 32](out, x)
        out *= 2  # cupy's work joins the capture
    host = np.arange(32.0)
    assert not out.get().any()  # captured, not run
    g.launch()
    od.synchronize("cuda")
    assert np.array_equal(out.get(), 2 * expected(host, lambda v: v + 1.0))
    compiles = od.stats()["compiles"]
    m.run("""
        @od.function
        def f(x):
            return x * 10.0
    """)
    g.launch()
    od.synchronize("cuda")
    assert np.array_equal(out.get(), 2 * expected(host, lambda v: v * 10.0))
    assert od.stats()["compiles"] == compiles + 1  # scale recompiled once (add does not call f)
    g.update(1, out, tmp, 5.0)
    g.launch()
    od.synchronize("cuda")
    assert np.array_equal(out.get(), 2 * expected(host, lambda v: v * 10.0, b=5.0))
    with pytest.raises(TypeError, match="captured for"):
        g.update(1, out, tmp, 5)  # an int: another compiled kernel
    g.close()


@pytest.mark.gpu
def test_a_cuda_graph_after_randomized_redefinitions_never_replays_stale_code(cupy, make_module):
    m = make_module(SOURCE)
    x, tmp, out = cupy.arange(32, dtype=np.float64), cupy.zeros(32), cupy.zeros(32)
    with od.graph(target="cuda") as g:
        od.cuda(m.scale, tmp, x, 2.0, blocks=1, threads=32, target="cuda")
        od.cuda(m.scale, out, tmp, 3.0, blocks=1, threads=32, target="cuda")
        od.cuda(m.add, out, x, blocks=1, threads=32, target="cuda")
    host, rng, stale = np.arange(32.0), random.Random(7), 0
    for _ in range(40):
        c = float(rng.randrange(1, 9))
        if rng.random() < 0.5:
            m.run(f"@od.function\ndef f(x):\n    return x * {c}\n")
            current = lambda v, c=c: v * c  # noqa: E731
        else:
            m.run(f"@od.function\ndef f(x):\n    return x + {c}\n")
            current = lambda v, c=c: v + c  # noqa: E731
        for _ in range(rng.randrange(1, 3)):
            g.launch()
        od.synchronize("cuda")
        stale += not np.array_equal(out.get(), expected(host, current))
    assert stale == 0
