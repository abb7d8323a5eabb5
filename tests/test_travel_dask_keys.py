"""Dask names pure work by a token of its function and arguments: a change of the client's definitions that
the function reaches must give new keys, or work submitted again (a notebook cell run again while its old
future is still held, a persisted collection) returns the result computed before the change."""

from __future__ import annotations

import functools
import logging
import sys
import textwrap
import types

import numpy as np
import pytest

dask = pytest.importorskip("dask")
from dask.tokenize import normalize_token, tokenize  # noqa: E402

SOURCE = """
import numpy as np
import overdub as od

@od.function
def h(x: od.Float):
    return x + 1.0

def task(x):
    return h(x)

def task_doubled(x):
    return h(x) * 2.0

def run_blocks(a):
    return np.array([h(float(v)) for v in a])

def plain(x):
    return x * 2

class Runner:
    def go(self, x):
        return h(x)
"""

REDEFINED = "@od.function\ndef h(x: od.Float):\n    return x + 5.0\n"


@pytest.fixture
def mylib(make_module, monkeypatch):
    """A module of the user's code, importable by name (so pickle, and Dask's token, name its functions)."""
    m = make_module(SOURCE, prefix="daskkeys")
    monkeypatch.setitem(sys.modules, m.__name__, m)
    return m


def test_a_module_function_reaching_a_redefined_generic_function_gets_a_new_dask_token(mylib):
    runner = mylib.Runner()
    tokens = lambda: [  # noqa: E731
        tokenize(mylib.task),
        tokenize(mylib.task, 1.0),
        tokenize(functools.partial(mylib.task, 1.0)),
        tokenize(runner.go),
    ]
    before = tokens()
    assert tokens() == before  # deterministic while nothing changes
    mylib.run(REDEFINED)  # SourceModule.run: more source in the module
    after = tokens()
    assert all(a != b for a, b in zip(before, after)), (before, after)
    assert tokens() == after


def test_a_functions_own_code_changing_in_place_gives_a_new_dask_token(mylib):
    before = tokenize(mylib.task)
    mylib.task.__code__ = mylib.task_doubled.__code__  # as %autoreload updates a def
    assert tokenize(mylib.task) != before


def test_functions_that_do_not_reach_overdub_tokenize_as_dask_does(mylib):
    dask_own = normalize_token.dispatch(types.FunctionType).__wrapped__  # overdub's hook is installed
    for func in (textwrap.dedent, functools.partial.__new__, mylib.plain):
        if type(func) is types.FunctionType:
            assert normalize_token(func) == dask_own(func)
    before = tokenize(mylib.plain)
    mylib.run(REDEFINED)  # SourceModule.run: more source in the module
    assert tokenize(mylib.plain) == before  # it reads no definition of overdub's


def test_delayed_and_map_blocks_keys_follow_the_clients_definitions(mylib):
    da = pytest.importorskip("dask.array")
    leaf = dask.delayed(mylib.task, pure=True)  # tokenized once, here
    x = da.arange(4.0, chunks=2)
    before = (leaf(1.0).key, dask.delayed(mylib.task, pure=True)(1.0).key, x.map_blocks(mylib.run_blocks).name)
    mylib.run(REDEFINED)  # SourceModule.run: more source in the module
    after = (leaf(1.0).key, dask.delayed(mylib.task, pure=True)(1.0).key, x.map_blocks(mylib.run_blocks).name)
    assert all(a != b for a, b in zip(before, after)), (before, after)
    with dask.config.set(scheduler="sync"):
        assert leaf(1.0).compute() == 6.0
        assert x.map_blocks(mylib.run_blocks).compute().tolist() == [5.0, 6.0, 7.0, 8.0]


def test_a_pure_dask_submit_run_again_after_a_redefinition_runs_the_new_definition(mylib):
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        x = da.arange(4.0, chunks=2)
        fut = client.submit(mylib.task, 1.0)  # pure=True, Dask's default
        futs = client.map(mylib.task, [1.0, 2.0])
        blocks = client.persist(x.map_blocks(mylib.run_blocks))
        assert (fut.result(timeout=60), client.gather(futs), blocks.compute().tolist()) == (
            2.0,
            [2.0, 3.0],
            [1.0, 2.0, 3.0, 4.0],
        )
        mylib.run(REDEFINED)  # SourceModule.run: more source in the module
        fut = client.submit(mylib.task, 1.0)  # the cell run again: its old future still held meanwhile
        futs = client.map(mylib.task, [1.0, 2.0])
        assert fut.result(timeout=60) == mylib.task(1.0) == 6.0
        assert client.gather(futs) == [6.0, 7.0]
        assert x.map_blocks(mylib.run_blocks).compute().tolist() == [5.0, 6.0, 7.0, 8.0]
        assert np.array_equal(blocks.compute(), [1.0, 2.0, 3.0, 4.0])  # what was persisted stays what it was
