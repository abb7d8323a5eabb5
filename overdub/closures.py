"""Kernels that are closures: captured values are data of the launch, not constants of the code.

A kernel defined inside a function -- a factory called once per configuration, a notebook helper -- closes
over variables. Compiling each closure with its captured values as constants would compile ``make(k)`` once
per ``k`` and keep every copy; Julia instead compiles a closure once per closure *type* (its code and the
types of what it captures) and passes the captured values as data. overdub does the same where it can: a
kernel whose captured variables all hold launch-argument data (numbers, arrays, pointers: anything with an
:mod:`overdub.arguments` kind) is *lifted* -- recompiled from its source as a function taking those variables
as leading parameters -- and each launch passes their current values. Closures of one ``def`` then share one
compiled kernel per tuple of captured types, and reassigning a captured variable changes the next launch's
data, not its code.

A closure capturing anything else (a helper function, a module) is compiled as it is, its cells read as
constants and tracked as edges (:mod:`overdub.bindings`); so is a closure whose source cannot be read.
"""

from __future__ import annotations
import __future__

import ast
import functools
import inspect
import operator
import textwrap
import types as pytypes
import weakref
from typing import TYPE_CHECKING, Literal, cast

from . import arguments
from .runtime import Launch, runtime

if TYPE_CHECKING:
    from .arguments import Argument

__all__ = ["Lifted", "lift", "keep_unlifted", "with_captured_values"]


class Lifted:
    """A closure kernel lifted: the shared function taking the captured variables first, and the cells whose
    values each launch passes (``captured_values``)."""

    __slots__ = ("function", "cells", "state")

    def __init__(self, function: pytypes.FunctionType, closure: pytypes.FunctionType) -> None:
        self.function = function
        self.cells: tuple[pytypes.CellType, ...] = closure.__closure__ or ()  # lift() lifts closures only
        self.state: tuple[object, ...] = (closure.__code__, closure.__defaults__, closure.__kwdefaults__)

    def captured_values(self) -> tuple[object, ...]:
        return tuple(cell.cell_contents for cell in self.cells)

    def still_describes(self, closure: pytypes.FunctionType) -> bool:
        """Is ``closure`` still the code this was lifted from (not replaced in place since)?"""
        return (closure.__code__, closure.__defaults__, closure.__kwdefaults__) == self.state


def lift(kernel: pytypes.FunctionType) -> Lifted | None:
    """``kernel`` lifted, or None where it is no closure, captures something other than data, has an empty
    cell, or has no readable source."""
    cells = kernel.__closure__
    if not cells:
        return None
    try:
        if any(arguments.kind_of(cell.cell_contents) is None for cell in cells):
            return None
    except ValueError:  # an empty cell: compile as it is, and let numba say what is unbound
        return None
    code = kernel.__code__
    function: pytypes.FunctionType | Literal[False] | None = runtime.lifted.get(code, False)
    if function is False:
        function = runtime.lifted[code] = _compile_lifted(kernel)
    if function is None or function.__globals__ is not kernel.__globals__:
        return None
    return Lifted(function, kernel)


_FUTURE_FLAGS = functools.reduce(
    operator.or_,
    (feature.compiler_flag for feature in map(lambda name: getattr(__future__, name), __future__.all_feature_names)),
)


def _source_is_the_code(kernel: pytypes.FunctionType, lines: list[str], first: int) -> bool:
    """Does compiling ``lines`` (at line ``first`` of the kernel's file, inside a function defining its free
    variables) give exactly the kernel's code? Not when the file was edited after the kernel was defined."""
    code = kernel.__code__
    if first < 2:
        return False
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    source = (
        "\n" * (first - 2)
        + "def __overdub_enclosing():\n"
        + "".join(lines)
        + "".join(f"{indent}{name} = None\n" for name in code.co_freevars)
    )
    flags = code.co_flags & _FUTURE_FLAGS  # compiled under the same __future__ imports
    try:
        enclosing = next(
            c
            for c in compile(source, code.co_filename, "exec", flags=flags, dont_inherit=True).co_consts
            if isinstance(c, pytypes.CodeType)
        )
    except (SyntaxError, StopIteration):
        return False
    inner = [c for c in enclosing.co_consts if isinstance(c, pytypes.CodeType) and c.co_name == code.co_name]
    return len(inner) == 1 and inner[0].replace(co_qualname=code.co_qualname) == code


def _compile_lifted(kernel: pytypes.FunctionType) -> pytypes.FunctionType | None:
    """The kernel's ``def`` recompiled from its source with its free variables as leading parameters, in its
    own module's namespace (so its globals stay edges of the module), or None."""
    code = kernel.__code__
    try:
        lines, first = inspect.getsourcelines(kernel)
    except (OSError, TypeError):
        return None
    if not _source_is_the_code(kernel, lines, first):
        return None  # the file changed since the closure was defined: its source is not its code
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:  # a lambda or a def sharing its line with other code
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == code.co_name]
    if len(defs) != 1:
        return None
    node = defs[0]
    node.decorator_list = []
    captured = [ast.arg(arg=name) for name in code.co_freevars]
    node.args.posonlyargs = captured + node.args.posonlyargs
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first - 1)
    namespace: dict[str, object] = {}
    exec(compile(tree, code.co_filename, "exec"), kernel.__globals__.copy() | {"__builtins__": __builtins__}, namespace)
    lifted = namespace.get(code.co_name)
    if not isinstance(lifted, pytypes.FunctionType) or lifted.__code__.co_freevars:
        return None
    lifted = pytypes.FunctionType(lifted.__code__, kernel.__globals__, kernel.__name__, kernel.__defaults__)
    lifted.__qualname__, lifted.__module__ = kernel.__qualname__, kernel.__module__
    lifted.__kwdefaults__ = kernel.__kwdefaults__
    return lifted


def keep_unlifted(kernel: pytypes.FunctionType) -> None:
    """From now on compile ``kernel`` as it is, its captured values constants: its lifted form did not compile
    (it uses a captured value where numba needs a constant, such as an array shape)."""
    runtime.lifted[kernel.__code__] = None


def with_captured_values(
    launch: Launch,
    lifted: Lifted,
    kernel: pytypes.FunctionType,
    described: tuple[Argument, ...],
    hidden: int = 0,
) -> Launch:
    """A launch function for the closure ``kernel`` (held weakly) from ``launch``, the lifted kernel's, made
    for arguments like the ``described`` ones (:class:`overdub.arguments.Argument`: the hidden ones, the
    captured values, the launch's own): it passes the captured values as they are at each launch (after the ``hidden``
    leading arguments it is given: a launch's state), and declines (False: the
    slow path) once one has another class than when it was made (launch functions rely on their caller to key
    argument classes), a captured variable was deleted, or the closure's code was replaced in place."""
    kernel_ref = weakref.ref(kernel)
    classes = tuple(type(argument.value) for argument in described[hidden : hidden + len(lifted.cells)])

    def launch_closure(args: tuple[object, ...], blocks: object, threads: object, shmem: int, stream: object) -> bool:
        closure = kernel_ref()
        if closure is None or not lifted.still_describes(closure):
            return False
        try:
            captured = lifted.captured_values()
        except ValueError:
            return False
        if tuple(map(type, captured)) != classes:
            return False
        return launch(args[:hidden] + captured + args[hidden:], blocks, threads, shmem, stream)

    vars(launch_closure).update(kernel=launch.kernel, guarded=launch.guarded)  # what a Launch adds to a call
    return cast(Launch, launch_closure)
