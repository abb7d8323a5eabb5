"""mypy plugin: the methods of a generic function, and ``od.Array[T, N]``, as mypy reads them.

Enable it in the project's mypy configuration::

    [tool.mypy]
    plugins = ["overdub.mypy_plugin"]

It does two things, and nothing else.

**A method is not a redefinition.** overdub's methods are successive defs of one name::

    @od.function
    def scale(x: od.Integer, k: od.Number): ...

    @od.function
    def scale(x: od.Float, k: od.Float): ...  # a second method of the same generic function

mypy's parser merges consecutive defs of one name into one overloaded definition
(``mypy.fastparse.ASTConverter.fix_function_overloads``); semantic analysis then finds no ``@overload``
decorator on them and reports each def after the first as ``Name "scale" already defined [no-redef]``
(``SemanticAnalyzer.handle_missing_overload_decorators``). No plugin hook runs during the analysis of a
function's decorators, so the plugin acts on the parsed file before semantic analysis, in
``get_additional_deps`` (the one hook that receives a module's tree at that point; it adds no
dependencies): a merged definition whose every def is decorated with ``od.function`` or ``od.method(...)``
is split back into its defs, and each def after the first is put under ``if True:``, which makes it what
mypy calls a conditional redefinition (semantic analysis sets ``FuncDef.is_conditional`` from the block
depth, so the flag cannot simply be set). mypy accepts such a redefinition when it keeps the name's type
(``SemanticAnalyzer.set_original_def``, then ``TypeChecker.check_func_def_override``), and it does: every
def of the name is the same ``GenericFunction``. Each def's body is still checked against its own
annotations. To gain a mental model, the file mypy analyses reads::

    @od.function
    def scale(x: od.Integer, k: od.Number): ...

    if True:
        @od.function
        def scale(x: od.Float, k: od.Float): ...

**od.Array[T, N] is a NumPy array.** No type checker accepts the number ``N`` as a type argument, so
``overdub.annotations.Array`` (what ``od.Array`` is to a type checker) is analysed here: ``od.Array[T,
N]`` becomes ``numpy.ndarray[tuple[int, ...N ints], numpy.dtype[T]]``, and ``od.Array[T]``
``numpy.ndarray[tuple[int, ...], numpy.dtype[T]]``.

Limits:

- Decorators are recognised by their spelling, before names are resolved: ``@od.function``,
  ``@overdub.function`` and ``@od.method(...)`` for a module imported as ``import overdub [as od]``, and
  ``@function``/``@method(...)`` imported ``from overdub``. Another spelling (an alias assigned at run
  time, a decorator stacked under another one) is not recognised, and its second def is reported.
- The hook must see the module's statements: with ``--num-workers`` (mypy's parallel mode) the native
  parser hands plugins only a module's imports at that point, so each further method is reported.
- Only merged definitions whose defs are all such methods are split: a plain ``def scale`` after an
  ``@od.function def scale`` is still a redefinition, as it is at run time.
- A context's overdubs (``@ctx.overdub(f)``) need nothing: name them ``_``, which mypy lets a module
  redefine.
- Without the plugin, ``od.Integer`` and the other lattice names are still valid types (they come from
  ``overdub.annotations``), but each further method is ``[no-redef]`` and ``od.Array[T, N]`` is invalid.
- Other type checkers (pyright) read overdub.annotations the same way, with neither of the two fixes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mypy.nodes import (
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    FuncDef,
    IfStmt,
    Import,
    ImportFrom,
    MemberExpr,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    Statement,
)
from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.types import AnyType, RawExpressionType, TupleType, Type, TypeOfAny

__all__ = ["plugin"]

_PACKAGE = "overdub"
_DECORATORS = {"function"}  # used bare: @od.function
_DECORATOR_FACTORIES = {"method"}  # called: @od.method(math.sin)
_ARRAY = "overdub.annotations.Array"


class OverdubPlugin(Plugin):
    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        _split_methods(file.defs, _overdub_names(file))
        return []

    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        return _analyze_array if fullname == _ARRAY else None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point."""
    return OverdubPlugin


# --- methods --------------------------------------------------------------------------------------------


_Names = tuple[set[str], dict[str, str]]


def _overdub_names(file: MypyFile) -> _Names:
    """The names the module binds to overdub itself, and those it binds to overdub's decorators (local name
    -> overdub's name for it)."""
    modules: set[str] = set()
    decorators: dict[str, str] = {}
    for node in file.imports:
        if isinstance(node, Import):
            modules |= {alias or module for module, alias in node.ids if module == _PACKAGE}
        elif isinstance(node, ImportFrom) and node.id == _PACKAGE and node.relative == 0:
            decorators |= {alias or name: name for name, alias in node.names}
    return modules, decorators


def _is_method_decorator(expr: Expression, names: _Names) -> bool:
    modules, decorators = names
    allowed = _DECORATOR_FACTORIES if isinstance(expr, CallExpr) else _DECORATORS
    if isinstance(expr, CallExpr):
        expr = expr.callee
    if isinstance(expr, MemberExpr) and isinstance(expr.expr, NameExpr):
        return expr.expr.name in modules and expr.name in allowed
    return isinstance(expr, NameExpr) and decorators.get(expr.name) in allowed


def _is_method(item: Decorator | FuncDef, names: _Names) -> bool:
    return isinstance(item, Decorator) and any(_is_method_decorator(d, names) for d in item.decorators)


def _split_methods(body: list[Statement], names: _Names) -> None:
    """Split, in place, each merged definition of methods in ``body`` and the blocks nested in it."""
    if not (names[0] or names[1]):
        return
    for index in reversed(range(len(body))):
        statement = body[index]
        if isinstance(statement, OverloadedFuncDef):
            items = statement.unanalyzed_items
            if all(_is_method(item, names) for item in items):
                body[index : index + 1] = [items[0], *(_conditional(item) for item in items[1:])]
        for block in _blocks(statement):
            _split_methods(block.body, names)


def _conditional(item: Statement) -> IfStmt:
    """``item`` under ``if True:``: to mypy, a conditional redefinition of its name."""
    condition = NameExpr("True")
    condition.set_line(item)
    block = Block([item])
    block.set_line(item)
    statement = IfStmt([condition], [block], None)
    statement.set_line(item)
    return statement


def _blocks(statement: Statement) -> Iterator[Block]:
    if isinstance(statement, ClassDef):
        yield statement.defs
    elif isinstance(statement, FuncDef):
        yield statement.body
    elif isinstance(statement, Decorator):
        yield statement.func.body
    elif isinstance(statement, OverloadedFuncDef):
        for item in statement.unanalyzed_items:
            yield item.func.body if isinstance(item, Decorator) else item.body
    elif isinstance(statement, IfStmt):
        yield from statement.body
        if statement.else_body is not None:
            yield statement.else_body


# --- od.Array[T, N] -------------------------------------------------------------------------------------


def _analyze_array(ctx: AnalyzeTypeContext) -> Type:
    args = ctx.type.args
    if not 1 <= len(args) <= 2:
        ctx.api.fail("od.Array takes [T] or [T, N]", ctx.context)
        return AnyType(TypeOfAny.from_error)
    dtype = ctx.api.named_type("numpy.dtype", [ctx.api.analyze_type(args[0])])
    int_type = ctx.api.named_type("builtins.int", [])
    any_shape = ctx.api.named_type("builtins.tuple", [int_type])
    if len(args) == 1:
        return ctx.api.named_type("numpy.ndarray", [any_shape, dtype])
    ndim = args[1]
    if not (isinstance(ndim, RawExpressionType) and type(ndim.literal_value) is int and ndim.literal_value >= 0):
        ctx.api.fail("od.Array[T, N] needs a non-negative integer N", ctx.context)
        return AnyType(TypeOfAny.from_error)
    fallback = ctx.api.named_type("builtins.tuple", [int_type])
    shape = TupleType([int_type] * ndim.literal_value, fallback)
    return ctx.api.named_type("numpy.ndarray", [shape, dtype])
