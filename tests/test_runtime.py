"""The runtime: one place for what overdub keeps, nothing kept alive by a redefinition, and a reset."""

import gc
import weakref

import numba
import numpy as np

import overdub as od
from helpers import CALLS_F, WRITES_ONE, compiles, method_f, methods
from overdub import compiler
from overdub.runtime import runtime


def collected(ref) -> bool:
    gc.collect()
    runtime.collect()
    return ref() is None


def test_a_redefined_kernel_function_and_its_compiled_code_are_released(make_module):
    m = make_module(WRITES_ONE)
    od.cuda(m.kernel, np.zeros(1, dtype=np.int64))
    old_function = weakref.ref(m.kernel)
    [old_kernel] = [k for k in runtime.kernels.nodes() if k.job.func is m.kernel]
    old_kernel = weakref.ref(old_kernel)
    m.run("""
        def kernel(out):
            out[0] = 2
    """)
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out)
    assert out[0] == 2
    assert collected(old_function) and collected(old_kernel)
    assert all(key[0]() is not None for key in runtime.launches)


def test_a_replaced_methods_code_is_released_once_no_kernel_uses_it(make_module):
    m = make_module(method_f("1") + CALLS_F)
    od.cuda(m.kernel, np.zeros(1, dtype=np.int64))
    old_def = weakref.ref(od.which(m.f, od.int64).func)
    [old_instance] = [n for n in runtime.methods.nodes() if n.job.func is old_def()]
    old_instance = weakref.ref(old_instance)
    m.run(method_f("2"))
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out)
    assert out[0] == 2
    assert collected(old_def) and collected(old_instance)


def test_kernels_made_per_call_of_a_factory_are_released_and_share_one_compile():
    def make(k):
        def kernel(out):
            out[0] = k

        return kernel

    before = len(runtime.kernels)
    refs = []
    for k in range(5):
        kernel = make(k)
        out = np.zeros(1, dtype=np.int64)
        od.cuda(kernel, out)
        assert out[0] == k
        refs.append(weakref.ref(kernel))
    del kernel
    assert all(collected(ref) for ref in refs)
    assert len(runtime.kernels) == before + 1  # the one compile the closures of the def share
    assert all(key[0]() is not None for key in runtime.launches)


def test_invalidation_removes_the_dead_kernel_from_the_backedges_of_what_stays_valid(make_module):
    m = make_module(methods(f="1", g="10") + "\n\ndef kernel(out):\n    out[0] = f(0) + g(0)\n")
    od.cuda(m.kernel, np.zeros(1, dtype=np.int64))
    g_match = m.g.table.dispatch((od.int64,))
    [kernel] = [k for k in runtime.kernels.nodes() if k.job.func is m.kernel]
    assert kernel in g_match.dependents()
    m.run(method_f("2"))
    assert not kernel.valid and g_match.valid
    assert kernel not in g_match.dependents() and kernel.edges == {}


def test_a_method_instances_cuda_registration_is_removed_when_it_dies(make_module):
    m = make_module(method_f("x + 1"), "def kernel(out):\n    out[0] = f(out[0])\n")
    array_type = numba.types.int64[::1]
    od.code_ptx(m.kernel, array_type)
    [instance] = [n for n in runtime.methods.nodes() if n.job.func is od.which(m.f, od.int64).func]
    target_context, impl_key = instance.keepalive.cres.target_context, instance.impl_key
    assert impl_key in target_context._defns
    del instance
    m.run(method_f("x + 2"))
    od.code_ptx(m.kernel, array_type)
    gc.collect()
    runtime.collect()
    assert impl_key not in target_context._defns


def test_reset_forgets_every_compiled_thing_and_zeroes_the_counters(make_module):
    m = make_module(method_f("1") + CALLS_F)
    out = np.zeros(1, dtype=np.int64)
    od.cuda(m.kernel, out)
    match = m.f.table.dispatch((od.int64,))
    compiler.reset()
    assert od.stats() == {
        "compiles": 0,
        "method_instances": 0,
        "disk_hits": 0,
        "disk_misses": 0,
        "disk_uncacheable": 0,
        "launches": 0,
    }
    assert (len(runtime.kernels), len(runtime.methods), runtime.launches, runtime.bindings) == (0, 0, {}, {})
    assert match.dependents() == []
    od.cuda(m.kernel, out)
    stats = od.stats()
    assert (stats["compiles"], stats["method_instances"], stats["launches"], out[0]) == (1, 1, 1, 1)
    assert compiles() == 1
