"""The typing bridge: where overdub meets numba's type system.

Everything that reaches into numba's typing lives here (and in the target modules), so that replacing
numba-cuda touches only these places.
"""
from __future__ import annotations

import numba


def typeof(value):
    """The numba type of a host value, as a kernel argument of that value would be typed."""
    return numba.typeof(value, numba.core.typing.typeof.Purpose.argument)
