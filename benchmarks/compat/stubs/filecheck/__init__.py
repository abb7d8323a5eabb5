"""Stand-in for the ``filecheck`` package, on PYTHONPATH only where it is not installed.

numba-cuda's ``numba.cuda.testing`` imports it at module level; only ``assertFileCheckAsm`` /
``assertFileCheckLLVM`` use it. With this stub the test modules import, and those assertions fail (in both
runs alike, so they never count as overdub-only failures)."""


class _Missing:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("filecheck is not installed (benchmarks/compat stub)")


Matcher = Options = Parser = FInput = _Missing


def pattern_for_opts(opts):
    raise RuntimeError("filecheck is not installed (benchmarks/compat stub)")
