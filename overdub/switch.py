"""The one-import switch, as source text: a numba-cuda program's imports rewritten the way a user switches them.

A numba-cuda program moves to overdub by its imports alone (:mod:`overdub.cuda`): ``from numba import cuda``
becomes ``from overdub import cuda``, and ``from numba.cuda[.X] import ...`` becomes ``from overdub.cuda[.X]
import ...``. :func:`switched_source` makes exactly that change to a module's source, and nothing else, for the
harnesses that run numba-cuda's own code switched (``tests/doc_examples.py``, ``benchmarks/compat.py``):

    from numba import cuda                    ->  from overdub import cuda
    from numba import cuda, vectorize         ->  from overdub import cuda; from numba import vectorize
    from numba.cuda import int32, void        ->  from overdub.cuda import int32, void
    from numba.cuda.core.config import X      ->  from overdub.cuda.core.config import X
    from numba.cuda.testing import X          ->  (unchanged: numba-cuda's test harness, not the program)
    import numba.cuda                         ->  (unchanged: a module reference, ``numba.cuda.X`` in the code)

Each line stays on its line, so a module compiled from the switched source under its own file name keeps the
line numbers of its file (tracebacks, ``inspect.getsource``, numba's source locations).
"""

from __future__ import annotations

import re

__all__ = ["HARNESS_MODULES", "switched_source"]

HARNESS_MODULES = ("testing", "tests")
"""The submodules of ``numba.cuda`` that are numba-cuda's test harness, never the program's: left as they are."""

# `from numba import a, cuda, b as c` on one line (a parenthesized list never names cuda in numba-cuda's code)
_FROM_NUMBA = re.compile(r"^([ \t]*)from numba import ([\w \t,]+?)[ \t]*(#.*)?$", re.M)
_HARNESS = "|".join(HARNESS_MODULES)
# `from numba.cuda[.X.Y] import` where no X, Y is a harness module
_FROM_NUMBA_CUDA = re.compile(rf"^([ \t]*)from numba\.cuda((?:\.(?!(?:{_HARNESS})\b)\w+)*) import\b", re.M)


_NUMBA_CUDA_MODULE = "cuda"  # numba's submodule that overdub's namespace replaces


def _from_numba(match: re.Match[str]) -> str:
    """``from numba import ...`` naming ``cuda``: ``cuda`` (under its alias, if any) from overdub, the rest from
    numba, on the same line."""
    indent, names, comment = match.groups()
    aliases = [name.strip() for name in names.split(",") if name.strip()]
    switched = [alias for alias in aliases if alias.split()[0] == _NUMBA_CUDA_MODULE]
    if not switched:
        return match.group(0)
    kept = [alias for alias in aliases if alias not in switched]
    imports = [f"from overdub import {', '.join(switched)}"]
    if kept:
        imports.append(f"from numba import {', '.join(kept)}")
    return indent + "; ".join(imports) + (f"  {comment}" if comment else "")


def switched_source(source: str) -> str:
    """``source`` with its imports of numba-cuda's namespace switched to overdub's, line for line."""
    source = _FROM_NUMBA.sub(_from_numba, source)
    return _FROM_NUMBA_CUDA.sub(r"\1from overdub.cuda\2 import", source)
