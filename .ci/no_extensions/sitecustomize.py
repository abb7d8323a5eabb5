"""Run Python as if overdub's C extensions were not built (no C compiler where it was installed).

CI puts this directory first on ``PYTHONPATH``; Python imports ``sitecustomize`` at startup, before anything
else, so ``overdub._fastlaunch`` (the native CUDA launcher) and ``overdub.targets.cpu._cpugrid`` (the native CPU grid
runner) cannot be imported -- a ``None`` in ``sys.modules`` makes ``import`` raise ``ImportError`` -- and
overdub takes its portable paths: launch functions generated in Python, the serial grid loop. Processes the
tests start inherit ``PYTHONPATH``, so they see the same. Set ``OVERDUB_ALLOW_NO_CPUGRID=1`` with it: the
tests of the runner's constructs are skipped then instead of failing.
"""

import sys

for _name in ("overdub._fastlaunch", "overdub.targets.cpu._cpugrid"):
    sys.modules[_name] = None
