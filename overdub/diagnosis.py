"""Compile failures a newcomer's kernel meets, said plainly: what is wrong, where, and what to do.

numba's report of a failure names its pipeline's pass and its typing templates; a kernel using a dict, a set,
a list, a generator, ``try``/``except``, a Python class or an undefined name, or sizing a shared array by a
variable, gets instead a few lines: the kernel's file and line, what kernels cannot do, what they do instead.
:func:`diagnosed` recognises these from numba's report and finds the line in the def's bytecode; a failure it
does not recognise keeps numba's report. The report is kept whole either way: the error's ``details``, shown
in the message where ``OVERDUB_ERRORS=full``.
"""

from __future__ import annotations

import builtins
import dis
import re
import types as pytypes
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .places import place

__all__ = ["Diagnosis", "diagnosed"]


@dataclass(frozen=True)
class Diagnosis:
    """What went wrong, plainly (``what``), at ``where`` ("file.py:12", or None)."""

    what: str
    where: str | None


def _instructions(func: pytypes.FunctionType) -> Iterator[tuple[pytypes.CodeType, dis.Instruction]]:
    """Every instruction of ``func`` and of the code nested in it (comprehensions, generator expressions)."""
    stack = [func.__code__]
    while stack:
        code = stack.pop()
        for instruction in dis.get_instructions(code):
            yield code, instruction
        stack.extend(c for c in code.co_consts if isinstance(c, pytypes.CodeType))


def _line(func: pytypes.FunctionType, match: Callable[[pytypes.CodeType, dis.Instruction], bool]) -> str | None:
    """Where the first instruction of ``func`` that ``match`` takes is (its file and line), or None."""
    for code, instruction in _instructions(func):
        if match(code, instruction):
            line = instruction.positions.lineno if instruction.positions else None
            if line is not None:
                return place(code.co_filename, line)
    return None


_REPORTED = re.compile(r'File "([^"]+)", line (\d+)')


def _reported(report: str) -> str | None:
    """The first place numba's report names (a callee's line, where the kernel's own code has no such
    construct), or None."""
    found = _REPORTED.search(report)
    return place(found.group(1), int(found.group(2))) if found else None


def _opname(*names: str) -> Callable[[pytypes.CodeType, dis.Instruction], bool]:
    return lambda code, instruction: instruction.opname in names


def _loads(name: str) -> Callable[[pytypes.CodeType, dis.Instruction], bool]:
    return lambda code, instruction: (
        instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF") and (instruction.argval == name)
    )


def _nested_generator(code: pytypes.CodeType, instruction: dis.Instruction) -> bool:
    return (
        instruction.opname == "LOAD_CONST"
        and isinstance(instruction.argval, pytypes.CodeType)
        and bool(
            instruction.argval.co_flags & (0x20 | 0x200)  # CO_GENERATOR, CO_ASYNC_GENERATOR
        )
    )


_UNDEFINED = re.compile(r"NameError: name '(\w+)' is not defined")
_UNTYPED_CLASS = re.compile(r"Untyped global name '(\w+)': Cannot determine Numba type of <class 'type'>")


def diagnosed(func: pytypes.FunctionType, report: str) -> Diagnosis | None:
    """The plain account of numba's ``report`` of compiling ``func`` (a kernel), or None where it is not one of
    the failures this module knows. Its place is the kernel's line of the construct, else the first numba
    reports (a callee's)."""
    found = _diagnosed(func, report)
    if found is None or found.where is not None:
        return found
    return Diagnosis(found.what, _reported(report))


def _diagnosed(func: pytypes.FunctionType, report: str) -> Diagnosis | None:
    if "DictType[" in report or "build_map" in report or "typed.Dict" in report:
        return Diagnosis(
            "dicts are not supported in kernels (nothing in a kernel allocates Python objects): use an array "
            "indexed by the key, or a tuple",
            _line(func, _opname("BUILD_MAP", "BUILD_CONST_KEY_MAP", "DICT_UPDATE", "MAP_ADD")),
        )
    if "build_set" in report:
        return Diagnosis(
            "sets are not supported in kernels (nothing in a kernel allocates Python objects): use an array of "
            "flags, or a tuple",
            _line(func, _opname("BUILD_SET", "SET_ADD", "SET_UPDATE")),
        )
    if "build_list" in report or ("reflected list" in report and "NRT" in report):
        return Diagnosis(
            "lists are not supported in kernels (nothing in a kernel allocates Python objects): use a tuple for "
            "a few values, or cuda.local.array(n, dtype) for a per-thread array",
            _line(func, _opname("BUILD_LIST", "LIST_APPEND", "LIST_EXTEND")),
        )
    if "use of yield" in report or ("generator" in report.lower() and "unsupported" in report.lower()):
        return Diagnosis(
            "generators and generator expressions are not supported in kernels: write a for loop",
            _line(func, _nested_generator) or _line(func, _opname("YIELD_VALUE")),
        )
    if "exception_match" in report or "Exception matching is limited" in report:
        return Diagnosis(
            "try/except is not supported in kernels (a kernel cannot catch an exception): test the condition "
            "with if before the operation instead",
            _line(func, _opname("PUSH_EXC_INFO", "CHECK_EXC_MATCH")) or _line(func, _opname("NOP")),
        )
    found = _UNTYPED_CLASS.search(report)
    if found:
        name = found.group(1)
        return Diagnosis(
            f"{name} is a Python class, which kernels cannot use: make it a device value type with @od.struct, "
            f"or pass its data as arrays and numbers",
            _line(func, _loads(name)),
        )
    found = _UNDEFINED.search(report)
    if found:
        name = found.group(1)
        import difflib  # (a failure's message only: not imported with overdub)

        known = [n for n in func.__globals__ if not n.startswith("__")] + dir(builtins)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" -- did you mean {close[0]!r}?" if close else ""
        return Diagnosis(f"name {name!r} is not defined{hint}", _line(func, _loads(name)))
    if "shared.array" in report and re.search(r">>> array\((u?int\d+|UniTuple\(u?int\d+ x \d+\))", report):
        return Diagnosis(
            "cuda.shared.array's shape must be a constant when the kernel compiles (a number, or a module-level "
            "constant): for a size known only at launch, use dynamic shared memory -- cuda.shared.array(0, "
            "dtype) and od.cuda(..., shmem=nbytes)",
            _line(func, lambda code, instruction: instruction.argval == "shared"),
        )
    return None
