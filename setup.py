"""Build configuration for overdub's optional native code (everything else is in pyproject.toml): the launch
path (``_fastlaunch``) and the CPU target's grid runner (``_cpugrid``).

The extensions are built against Python's limited API (3.11), so one binary serves CPython 3.11 and later, and
the wheel is tagged ``cp311-abi3-<platform>`` so that pip installs it into any of them. When no
C compiler is available the build is skipped and overdub launches through its pure-Python path (and the CPU
target runs blocks one after another, without barriers).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "overdub._fastlaunch",
            ["overdub/_fastlaunch.c"],
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            optional=True,
        ),
        Extension(  # the CPU target's grid runner: parallel blocks, fibers for barriers
            "overdub.targets.cpu._cpugrid",
            ["overdub/targets/cpu/_cpugrid.c"],
            py_limited_api=True,
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            libraries=["pthread"],
            optional=True,  # without it blocks run one after another and barriers are refused
        ),
    ],
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
