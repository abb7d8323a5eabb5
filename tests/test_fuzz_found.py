"""Cases the differential kernel fuzzer (tests/fuzz_kernels.py, docs/fuzzing.md) found, each shrunk to a small
kernel: what it computes is what its reference (Python on numpy's int64, which wraps) computes.

Found and fixed elsewhere (their tests live beside the fix): a struct's operator methods annotated ``o: "S"``
under ``from __future__ import annotations`` (tests/test_structs.py); ``int(x)`` of an extreme float on the
CPU target (tests/test_parity.py).
"""

import numpy as np
import pytest

from helpers import run

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

WRAPPING = """
    import numpy as np
    from numba import cuda

    def constants(out):
        i = cuda.grid(1)
        out[i] = ((np.int64(2147483648) // 6) * 6364136223846793005 + 1442695040888963407) % 8

    def past_the_top(out, x):
        i = cuda.grid(1)
        out[i] = (x + 9223372036854775807) > x

    def times_four(out, x):
        i = cuda.grid(1)
        out[i] = (x * 4) // 4 == x

    def plus_the_sign_bit(out, xs):
        i = cuda.grid(1)
        out[i] = xs[i] + (-9223372036854775807 - 1)

    def abs_of_a_wrapped_product(out, xs):
        i = cuda.grid(1)
        out[i] = abs(xs[i] * 6364136223846793005 + 1442695040888963407)
"""


def _wrapped(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


WRAPPED_SIGN_BIT = [_wrapped(x - 2**63) for x in (-772, -14)]  # 2**63 - 772, 2**63 - 14
WRAPPED_ABS = [abs(_wrapped(x * 6364136223846793005 + 1442695040888963407)) for x in (-772, -14)]


def test_the_reference_wraps_as_int64_does():
    assert _wrapped(357913941 * 6364136223846793005 + 1442695040888963407) % 8 == 0
    assert _wrapped(1 + INT64_MAX) == INT64_MIN
    assert _wrapped(2**62 * 4) == 0
    assert WRAPPED_SIGN_BIT == [9223372036854775036, 9223372036854775794]


@pytest.mark.parametrize("debug", [None, True], ids=["guarded", "checked"])
def test_signed_integer_overflow_wraps_and_is_never_assumed_away(make_module, debug):
    """numba lowers signed ``+``, ``-`` and ``*`` with LLVM's ``nsw`` flag (numba/cpython/numbers.py,
    ``_int_arith_flags``): an overflow is poison, which LLVM may fold to anything. Found by the fuzzer as
    ``(c // 6 * 6364136223846793005 + ...) % 8`` giving 7467331059457567808 (not even a remainder of 8); with
    run-time values too, ``x + INT64_MAX > x`` folds to True for x = 1 and ``x * 4 // 4 == x`` to True for
    x = 2**62; ``x + INT64_MIN`` gave x back, and ``abs`` of a wrapped product a negative number. A kernel's
    int64 arithmetic wraps (as numpy's and the fuzzer's reference do), on both targets."""
    m = make_module(WRAPPING)
    assert run(m.constants, blocks=1, threads=1, target="cpu", debug=debug) == [0]
    assert run(m.past_the_top, np.int64(1), blocks=1, threads=1, target="cpu", debug=debug) == [0]
    assert run(m.times_four, np.int64(2**62), blocks=1, threads=1, target="cpu", debug=debug) == [0]
    xs = np.array([-772, -14], np.int64)
    assert run(m.plus_the_sign_bit, xs, n=2, blocks=1, threads=2, target="cpu", debug=debug) == WRAPPED_SIGN_BIT
    assert run(m.abs_of_a_wrapped_product, xs, n=2, blocks=1, threads=2, target="cpu", debug=debug) == WRAPPED_ABS


@pytest.mark.gpu
def test_signed_integer_overflow_wraps_on_cuda_as_on_the_cpu_target(make_module, cupy):
    m = make_module(WRAPPING)
    for target in ("cpu", "cuda"):
        assert run(m.constants, blocks=1, threads=1, target=target) == [0], target
        assert run(m.past_the_top, np.int64(1), blocks=1, threads=1, target=target) == [0], target
        assert run(m.times_four, np.int64(2**62), blocks=1, threads=1, target=target) == [0], target
        xs = cupy.asarray([-772, -14], np.int64) if target == "cuda" else np.array([-772, -14], np.int64)
        assert run(m.plus_the_sign_bit, xs, n=2, blocks=1, threads=2, target=target) == WRAPPED_SIGN_BIT, target
        assert run(m.abs_of_a_wrapped_product, xs, n=2, blocks=1, threads=2, target=target) == WRAPPED_ABS, target
