"""User structs: immutable value types that live on the device (Julia's isbits structs), parametric ones, and
arrays of them.

``@od.struct`` turns a class with annotated fields into a struct class: its values are made on the host or
in a kernel (``Circle(r)``, positional or keyword, with the defaults the class body gives), passed to kernels
by value, read field by field (``c.r``), returned from device methods and stored in arrays. Host values are
immutable. The class's concrete lattice type is a :class:`~overdub.types.StructType` (``Circle.__overdub_type__``),
so methods dispatch on it like on any numba type, and below every ``od.AbstractType`` class it derives from.

A struct deriving from ``typing.Generic[T]`` with fields annotated ``T`` is *parametric*: ``Dual[od.float32]``
is one concrete struct class (made once per parameter tuple, a subclass of ``Dual``), and ``Dual(x, 1.0)``
infers ``T`` from its arguments -- on the host from the values, in a kernel from their numba types -- by the
same rule (:func:`bind`): numbers promote as numpy promotes them, structs must agree.

A field takes a value of its type or of a lower numeric kind (bool < integer < float < complex, any width):
``Circle(1)`` makes ``r`` 1.0, while ``Count(2.5)`` for an integer field is an error, on the host and in
kernels alike.

Redefinition: each class statement makes a new type (the class is the type's identity), so code compiled for
one class never reads values of another. A module-level struct class redefined by a later class statement
of the same module and name (a notebook cell run again) is *superseded*: its :class:`StructDefinition` node
is invalidated, and with it the code that read its fields or made its values; its values and arrays are
refused from then on, with an error saying to make them again with the current class.
"""

from __future__ import annotations

import inspect
import sys
import threading
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn, TypeAlias, TypeGuard

import numpy as np

from . import dunders, reruns, world
from . import types as lattice
from .places import place
from .runtime import runtime
from .types import LatticeMeta, LatticeType, StructPattern, StructType

if TYPE_CHECKING:
    from numba.core import types as nt

__all__ = ["struct", "struct_dtype", "StructMeta", "StructValue", "StructDefinition", "bind"]

_lock = threading.RLock()  # instantiations: one at a time
_PYTHON_FIELDS: dict[object, nt.Type] = {
    int: lattice.int64,
    float: lattice.float64,
    bool: lattice.bool_,
    complex: lattice.complex128,
}
_latest: dict[tuple[str, str], StructMeta] = {}  # (module, qualname) -> the current module-level struct class
runtime.register_cache(f"{__name__}._latest", _latest, kept="a definition table (which class is current), not a cache")


# --- what a class statement says --------------------------------------------------------------------------

_FieldAnnotation: TypeAlias = "nt.Type | typing.TypeVar"  # a field's numba type, or a type variable of the class


class _Spec:
    """A struct class's fields as written: names, annotations (numba types, StructTypes or the class's type
    variables), defaults, the Python signature constructors bind with, and where the class was defined."""

    __slots__ = ("names", "annotations", "defaults", "params", "signature", "where")

    def __init__(
        self,
        names: Sequence[str],
        annotations: Iterable[_FieldAnnotation],
        defaults: Mapping[str, object],
        params: Iterable[typing.TypeVar],
        where: str,
    ) -> None:
        self.names, self.annotations, self.defaults = tuple(names), tuple(annotations), dict(defaults)
        self.params, self.where = tuple(params), where
        self.signature = inspect.Signature(
            [
                inspect.Parameter(
                    n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=self.defaults.get(n, inspect.Parameter.empty)
                )
                for n in names
            ]
        )


def _field_type(owner: str, name: str, annotation: object, params: tuple[typing.TypeVar, ...]) -> _FieldAnnotation:
    """The numba type a field annotation means, or the class's type variable it names."""
    if isinstance(annotation, typing.TypeVar) and annotation in params:
        return annotation
    if annotation in _PYTHON_FIELDS:
        return _PYTHON_FIELDS[annotation]
    t = annotation.__dict__.get("__overdub_type__") if isinstance(annotation, LatticeMeta) else annotation
    if _is_field_type(t):
        return t
    raise TypeError(
        f"{owner}.{name}: a struct field cannot be of type {lattice.type_name(annotation)}; use a "
        f"numeric type (od.float32, od.int64, ..., od.bool_ or int/float/bool/complex), another "
        f"concrete @od.struct class, or one of the class's type variables"
    )


def _is_field_type(t: object) -> TypeGuard[nt.Type]:
    return isinstance(t, StructType) or lattice.numeric_kind(t) is not None


def _spec_of(cls: type, where: str) -> _Spec:
    params: tuple[typing.TypeVar, ...] = tuple(getattr(cls, "__parameters__", ()))
    try:
        annotations: dict[str, object] = inspect.get_annotations(cls, eval_str=True)
    except NameError as exc:
        raise TypeError(f"cannot evaluate the field annotations of {cls.__qualname__}: {exc}") from None
    names: list[str] = []
    types_: list[_FieldAnnotation] = []
    defaults: dict[str, object] = {}
    for name, annotation in annotations.items():
        if typing.get_origin(annotation) is typing.ClassVar or annotation is typing.ClassVar:
            continue
        names.append(name)
        types_.append(_field_type(cls.__qualname__, name, annotation, params))
        if name in vars(cls):
            defaults[name] = vars(cls)[name]
    if not names:
        raise TypeError(f"@od.struct {cls.__qualname__} has no fields: annotate them in the class body (r: od.float32)")
    unused = [p for p in params if p not in types_]
    if unused:
        raise TypeError(
            f"{cls.__qualname__}: the type parameter {unused[0].__name__} annotates no field, so constructors "
            f"could not infer it; annotate a field with it"
        )
    return _Spec(names, types_, defaults, params, where)


# --- host values ------------------------------------------------------------------------------------------


class StructValue:
    """The base of every struct class: host values are immutable and compare by value."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(
            f"{type(self).__qualname__} values are immutable: cannot set {name!r} (make a new "
            f"value: {_fields_call(type(self))})"
        )

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__qualname__} values are immutable: cannot delete {name!r}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={_plain(getattr(self, n))!r}" for n, _ in _fields(type(self)))
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n, _ in _fields(self))

    def __hash__(self) -> int:
        return hash((type(self), tuple(getattr(self, n) for n, _ in _fields(self))))

    def __reduce__(
        self,
    ) -> tuple[Callable[..., StructValue], tuple[StructMeta, tuple[LatticeType, ...], tuple[object, ...]]]:
        cls = typing.cast("StructMeta", type(self))  # a struct class: StructMeta's instance
        return _remake, (
            cls.__overdub_base__ or cls,
            cls.__overdub_type__.params,
            tuple(getattr(self, n) for n, _ in _fields(self)),
        )


def _remake(cls: StructMeta, params: tuple[LatticeType, ...], values: tuple[object, ...]) -> StructValue:
    return (typing.cast("StructMeta", cls[params]) if params else cls)(*values)  # concrete parameters: a class


def _fields(cls_or_value: object) -> tuple[tuple[str, nt.Type], ...]:
    cls = typing.cast("StructMeta", cls_or_value if isinstance(cls_or_value, type) else type(cls_or_value))
    return cls.__overdub_type__.fields


def _fields_call(cls: type) -> str:
    return f"{cls.__qualname__}({', '.join(n for n, _ in _fields(cls))})"


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


class StructMeta(LatticeMeta):
    """The metaclass of struct classes: calling one makes a value, subscripting a parametric one instantiates
    it, ``dtype`` is the numpy dtype of arrays of it."""

    # what make() and _instantiate() set on each struct class (declarations only: no class attributes)
    __overdub_spec__: _Spec  # the fields as written
    __overdub_base__: StructMeta | None  # an instantiation's parametric class
    __overdub_type__: StructType  # a concrete class's (a parametric class's own is its StructPattern)
    __overdub_instances__: dict[tuple[LatticeType, ...], StructMeta]  # a parametric class's instantiations
    __overdub_definition__: StructDefinition  # its class statement, as a world node
    _numba_type_: StructType  # a concrete class's: what numba's typeof answers for its values

    def __call__(cls, *args: object, **kwargs: object) -> StructValue:
        concrete, values = bind(cls, args, kwargs, _typeof_host)
        concrete.__overdub_type__.check_current("make a value of")
        value = object.__new__(typing.cast("type[StructValue]", concrete))  # a struct class
        for (name, ftype), item in zip(concrete.__overdub_type__.fields, values):
            object.__setattr__(value, name, _convert(concrete, name, item, ftype))
        return value

    def __getitem__(cls, params: object) -> StructMeta | StructPattern:
        """``Dual[od.float32]``: the concrete struct class of those parameters; ``Dual[od.Float]``: the pattern
        of the instantiations whose parameters are below those."""
        spec = cls.__overdub_spec__
        if not spec.params or cls.__overdub_base__ is not None:
            raise TypeError(f"{cls.__qualname__} is not a parametric struct: it takes no type parameters")
        params = tuple(lattice.as_type(p) for p in (params if isinstance(params, tuple) else (params,)))
        if len(params) != len(spec.params):
            raise TypeError(
                f"{cls.__qualname__} takes {len(spec.params)} type parameter"
                f"{'s' if len(spec.params) != 1 else ''}, not {len(params)}"
            )
        if all(lattice.is_concrete(p) for p in params):
            bad = [p for p in params if not _is_field_type(p)]
            if bad:
                raise TypeError(
                    f"{cls.__qualname__}[{lattice.type_name(bad[0])}]: {lattice.type_name(bad[0])} cannot "
                    f"be the type of a field"
                )
            return _instantiate(cls, params)
        return StructPattern(cls, params)

    def __overdub_bind__(
        cls, argtypes: tuple[nt.Type, ...], kwtypes: dict[str, nt.Type]
    ) -> tuple[StructType, tuple[nt.Type, ...]]:
        """A constructor call in a kernel, typed: (the struct type it makes, each field's argument type, the
        field's own type where the call omits it and its default is used). Raises TypeError naming the field
        whose argument does not convert."""
        concrete, items = bind(cls, argtypes, kwtypes, lambda t: t)
        struct_type = concrete.__overdub_type__
        world.consult(typing.cast("StructDefinition", struct_type.definition))  # make() set it
        struct_type.check_current("make a value of")
        fieldtypes: list[nt.Type] = []
        for (name, ftype), item in zip(struct_type.fields, items):
            if isinstance(item, Default):
                item = ftype
            if not convertible(item, ftype):
                raise TypeError(
                    f"{concrete.__qualname__}: field {name!r} is {lattice.type_name(ftype)}, and "
                    f"{_describe(item)} does not convert to it"
                )
            fieldtypes.append(item)
        return struct_type, tuple(fieldtypes)

    @property
    def dtype(cls) -> np.dtype[typing.Any]:
        """The numpy dtype of arrays of this struct (aligned as the device lays the struct out)."""
        t = cls.__dict__.get("__overdub_type__")
        if not isinstance(t, StructType):
            raise TypeError(
                f"{cls.__qualname__} is parametric: arrays hold one instantiation "
                f"({cls.__qualname__}[od.float64].dtype, say)"
            )
        return typing.cast("np.dtype[typing.Any]", t.numpy_dtype)  # None only while _make_concrete makes it


_HOST_SCALARS: dict[type, nt.Type] = {float: lattice.float64, bool: lattice.bool_, complex: lattice.complex128}


def _typeof_host(value: object) -> nt.Type | None:
    """The type of a host value for a field, as a kernel argument of it would be typed (the common scalars
    without asking numba)."""
    cls = type(value)
    t = _HOST_SCALARS.get(cls) or cls.__dict__.get("__overdub_type__")
    if lattice.is_concrete(t):
        return t
    if cls is int and isinstance(value, int) and -(2**63) <= value < 2**63:
        return lattice.int64
    try:
        return lattice.typeof(value)
    except Exception:  # numba cannot type it: say which value below
        return None


def _convert(cls: StructMeta, name: str, value: object, ftype: nt.Type) -> object:
    """A host value for the field ``name`` of type ``ftype``: a numpy scalar of the field's type, or a struct."""
    if isinstance(value, Default):
        value = value.value
    vtype = _typeof_host(value)
    if not convertible(vtype, ftype):
        raise TypeError(
            f"{cls.__qualname__}: field {name!r} is {lattice.type_name(ftype)}, and "
            f"{_describe(value)} does not convert to it"
        )
    if isinstance(ftype, StructType):
        return value
    return _scalar_class(ftype)(value)


_scalar_classes: dict[nt.Type, type[np.generic]] = {}
runtime.register_cache(f"{__name__}._scalar_classes", _scalar_classes)


def _scalar_class(ftype: nt.Type) -> type[np.generic]:
    """The numpy scalar class of a numeric field type (cached: numba's as_dtype is slow)."""
    cls = _scalar_classes.get(ftype)
    if cls is None:
        cls = _scalar_classes[ftype] = lattice.dtype_of(ftype).type
    return cls


def _describe(value: object) -> str:
    if lattice.is_concrete(value):
        return f"a {lattice.type_name(value)}"
    return f"{value!r:.60} ({type(value).__name__})"


def convertible(src: object, dst: nt.Type) -> TypeGuard[nt.Type]:
    """Can a value of type ``src`` initialise a field of type ``dst``? Numbers of a kind no higher than the
    field's (bool < integer < float < complex); a struct only of the field's own type."""
    if isinstance(dst, StructType) or isinstance(src, StructType):
        return src == dst
    src_rank, dst_rank = lattice.numeric_kind(src), lattice.numeric_kind(dst)
    return src_rank is not None and dst_rank is not None and src_rank <= dst_rank


# --- binding a constructor call: the host and kernels share it --------------------------------------------


def bind(
    cls: StructMeta, args: Sequence[object], kwargs: Mapping[str, object], type_of: Callable[[typing.Any], object]
) -> tuple[StructMeta, list[object]]:
    """(the concrete struct class, each field's argument) for a call ``cls(*args, **kwargs)``; omitted fields
    get their defaults. ``type_of`` types an argument: a host value's type on the host, the identity in a
    kernel (whose arguments are types). A parametric class infers its parameters from the arguments' types."""
    spec = cls.__overdub_spec__
    if not kwargs and len(args) == len(spec.names):
        items: list[object] = list(args)  # every field, in order: nothing to bind
    else:
        try:
            bound = spec.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(
                f"{_fields_call(cls) if spec.params == () else cls.__qualname__ + str(spec.signature)}: {exc}"
            ) from None
        items = [bound.arguments[n] if n in bound.arguments else Default(spec.defaults[n]) for n in spec.names]
    if spec.params and cls.__overdub_base__ is None:
        cls = _instantiate(cls, _infer(cls, spec, items, type_of))
    return cls, items


class Default:
    """A field the call omitted: its default (a host value, converted to the field's type where it is used)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _infer(
    cls: StructMeta, spec: _Spec, items: list[object], type_of: Callable[[typing.Any], object]
) -> tuple[nt.Type, ...]:
    """The type parameters of a parametric struct from the types of the arguments of the fields they annotate
    (numbers promote as numpy promotes them; structs must be equal)."""
    params: list[nt.Type] = []
    for param in spec.params:
        found: list[nt.Type] = []
        for name, annotation, item in zip(spec.names, spec.annotations, items):
            if annotation is param and not isinstance(item, Default):
                t = type_of(item)
                if not _is_field_type(t):
                    raise TypeError(
                        f"{cls.__qualname__}: field {name!r} (of type {param.__name__}) cannot hold {_describe(item)}"
                    )
                found.append(t)
        if not found:
            raise TypeError(
                f"{cls.__qualname__}: no argument gives the type parameter {param.__name__}; pass the fields it "
                f"annotates, or instantiate explicitly ({cls.__qualname__}[od.float64](...))"
            )
        params.append(_promote(cls, param, found))
    return tuple(params)


def _promote(cls: StructMeta, param: typing.TypeVar, found: list[nt.Type]) -> nt.Type:
    if any(isinstance(t, StructType) for t in found):
        if any(t != found[0] for t in found):
            raise TypeError(
                f"{cls.__qualname__}: the arguments give {param.__name__} the different types "
                f"{', '.join(sorted({lattice.type_name(t) for t in found}))}"
            )
        return found[0]
    key = tuple(found)
    promoted = _promoted.get(key)
    if promoted is None:
        promoted = _promoted[key] = lattice.from_dtype(np.result_type(*[lattice.dtype_of(t) for t in found]))
    return promoted


_promoted: dict[tuple[nt.Type, ...], nt.Type] = {}  # numeric types -> the type numpy promotes them to
runtime.register_cache(f"{__name__}._promoted", _promoted)


# --- making struct classes --------------------------------------------------------------------------------


def struct(cls: object) -> StructMeta:
    """Decorator: make ``cls``, a class with annotated fields, an immutable device value type (see the module
    documentation). Derive it from ``od.AbstractType`` classes to place it under them, and from
    ``typing.Generic[T]`` to make it parametric."""
    if not isinstance(cls, type) or issubclass(cls, tuple):
        raise TypeError(f"@od.struct takes a class with annotated fields, not {cls!r:.60}")
    if any(isinstance(base, StructMeta) for base in cls.__mro__[1:]):
        raise TypeError(
            f"{cls.__qualname__} derives from a struct class: structs are final (derive both from an "
            f"od.AbstractType class instead)"
        )
    written = [name for name in ("__init__", "__new__", "__setattr__", "__delattr__") if name in vars(cls)]
    if written:
        raise TypeError(
            f"{cls.__qualname__} defines {written[0]}: a struct's constructor takes its fields' values "
            f"and its values are immutable; write a function that computes the fields and calls "
            f"{cls.__qualname__}(...) instead (Julia's outer constructor)"
        )
    caller = sys._getframe(1)  # the class statement being decorated
    where = place(caller.f_code.co_filename, caller.f_lineno)
    return _defined_again(cls, where) or make(cls, where)


def make(cls: type, where: str, current: bool = True) -> StructMeta:
    """The struct class of ``cls`` (checked by :func:`struct`), defined at ``where``; ``current=False``: a
    definition its sender had already superseded (a value of it sent to another process along with the
    current one), made superseded rather than superseding the current class."""
    spec = _spec_of(cls, where)
    namespace = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__") and k not in spec.defaults}
    namespace.update(__qualname__=cls.__qualname__, __overdub_spec__=spec, __overdub_base__=None)
    new = StructMeta(cls.__name__, (StructValue,) + cls.__bases__, namespace)
    if spec.params:
        new.__overdub_type__ = StructPattern(new, None)  # type: ignore[assignment]  # a parametric class's own
        new.__overdub_instances__ = {}
    else:
        _make_concrete(new, spec.annotations)
    new.__overdub_definition__ = StructDefinition(new)
    if not spec.params:
        new.__overdub_type__.definition = new.__overdub_definition__
    dunders.register(new, new.__overdub_type__)  # its __add__, __radd__, __neg__...: methods of the operators
    if current:
        _supersede(new)
    else:
        new.__overdub_definition__.superseded_at = "the process it came from"
        new.__overdub_definition__.valid = False
    return new


# a class statement's own entries that say nothing of its meaning (the spec compares the annotations)
_PLACE = frozenset(
    (
        "__module__",
        "__qualname__",
        "__dict__",
        "__weakref__",
        "__annotations__",
        "__firstlineno__",
        "__static_attributes__",
        "__orig_bases__",
        "__parameters__",
    )
)


def _defined_again(cls: type, where: str) -> StructMeta | None:
    """The current struct class of ``cls``'s module and name where ``cls`` is its class statement run again
    unchanged (a notebook cell, ``exec``, a reload): the same fields, field types, defaults, bases and members
    (defs of the same definitions: :mod:`overdub.reruns`). It stays -- its values, arrays and the code reading
    them stay valid -- and says where it was defined last. Else None: :func:`make` makes the new class, which
    supersedes the old."""
    if "<" in cls.__qualname__:
        return None
    old = _latest.get((cls.__module__, cls.__qualname__))
    if old is None or not old.__overdub_definition__.valid or old.__bases__[1:] != cls.__bases__:
        return None
    spec, old_spec = _spec_of(cls, where), old.__overdub_spec__
    if (spec.names, spec.params) != (old_spec.names, old_spec.params) or any(
        a is not b and a != b for a, b in zip(spec.annotations, old_spec.annotations)
    ):
        return None
    defaults = [spec.defaults.get(name, _NO_DEFAULT) for name in spec.names]
    if not reruns.same_values(tuple(defaults), tuple(old_spec.defaults.get(n, _NO_DEFAULT) for n in spec.names)):
        return None
    members = {k: v for k, v in vars(cls).items() if k not in _PLACE and k not in spec.defaults}
    old_members = {
        k: v
        for k, v in vars(old).items()
        if k not in _PLACE and not k.startswith("__overdub") and k != "_numba_type_" and k not in spec.defaults
    }
    if members.keys() != old_members.keys():
        return None
    if not all(reruns.same_member(members[k], old_members[k]) for k in members):
        return None
    old_spec.where = where
    return old


_NO_DEFAULT = object()


def add_members(cls: StructMeta, members: Mapping[str, object]) -> None:
    """Give ``cls``, made by :func:`make` from a class statement without its methods, those methods: its
    operator dunders become methods of the operators, as :func:`make` makes them."""
    for name, value in members.items():
        type.__setattr__(cls, name, value)
    dunders.register(cls, cls.__overdub_type__, members)


def _instantiate(base: StructMeta, params: tuple[LatticeType, ...]) -> StructMeta:
    """The concrete class ``base[params]``, made once."""
    with _lock:
        made = base.__overdub_instances__.get(params)
        if made is None:
            name = f"{base.__qualname__}[{', '.join(lattice.type_name(p) for p in params)}]"
            made = StructMeta(
                name.rsplit(".", 1)[-1],
                (base,),
                {
                    "__module__": base.__module__,
                    "__qualname__": name,
                    "__overdub_spec__": base.__overdub_spec__,
                    "__overdub_base__": base,
                },
            )
            binding: dict[_FieldAnnotation, LatticeType] = dict(zip(base.__overdub_spec__.params, params))
            _make_concrete(made, [binding.get(a, a) for a in base.__overdub_spec__.annotations], base, params)
            made.__overdub_type__.definition = base.__overdub_definition__
            base.__overdub_instances__[params] = made
    return made


def _make_concrete(
    cls: StructMeta,
    field_types: Sequence[object],
    base: StructMeta | None = None,
    params: tuple[LatticeType, ...] = (),
) -> None:
    """Give ``cls`` its StructType, and the dtype (with the StructType in its metadata) of arrays of it."""
    # its type variables bound: each field's type is a numba type
    fields = typing.cast("tuple[tuple[str, nt.Type], ...]", tuple(zip(cls.__overdub_spec__.names, field_types)))
    struct_type = StructType(cls, fields, None, base, params)
    struct_type.numpy_dtype = np.dtype(
        [(n, lattice.dtype_of(t)) for n, t in fields], align=True, metadata={lattice.STRUCT_METADATA: struct_type}
    )
    cls.__overdub_type__ = struct_type
    cls._numba_type_ = struct_type  # what numba's typeof answers for values of the class  # what numba's typeof answers for values of the class


# --- redefinition -----------------------------------------------------------------------------------------


class StructDefinition(world.Node):
    """A class statement of a struct, as a node: code that reads fields of its values or makes them holds an
    edge to it. Running the statement again (same module and name) invalidates it, and so that code; values
    and arrays of the old class are then refused with :meth:`superseded`'s message."""

    __slots__ = ("cls", "superseded_at")

    def __init__(self, cls: StructMeta) -> None:
        super().__init__()
        self.cls: StructMeta = cls
        self.superseded_at: str | None = None

    def describe(self) -> str:
        return f"struct {self.cls.__qualname__} defined at {self.cls.__overdub_spec__.where}"

    def superseded(self, struct_type: StructType) -> str:
        return (
            f"it is of the class {self.cls.__qualname__} defined at {self.cls.__overdub_spec__.where}, which "
            f"was redefined at {self.superseded_at}; make it again with the current {self.cls.__qualname__}"
        )


def _supersede(cls: StructMeta) -> None:
    """A module-level class statement run again retires the class it replaces (closures' classes, whose names
    hold ``<locals>``, are separate classes each time and retire nothing)."""
    if "<" in cls.__qualname__:
        return
    key = (cls.__module__, cls.__qualname__)
    with world.lock:
        old = _latest.get(key)
        _latest[key] = cls
        if old is None:
            return
        definition = old.__overdub_definition__
        definition.superseded_at = cls.__overdub_spec__.where
        world.bump_world()
        world.invalidate([definition], f"struct {cls.__qualname__} redefined at {definition.superseded_at}")


# --- arrays -----------------------------------------------------------------------------------------------


def struct_dtype(cls: object, what: str = "od.struct_array") -> np.dtype[typing.Any]:
    """The numpy dtype of values of the struct ``cls`` (a concrete, current @od.struct class), as an array of
    them holds them; a clear error naming ``what`` for anything else."""
    t = cls.__dict__.get("__overdub_type__") if isinstance(cls, StructMeta) else None
    if not isinstance(t, StructType):
        raise TypeError(
            f"{what} takes a concrete @od.struct class, not {cls!r:.60}"
            + (" (a parametric one: instantiate it, Dual[od.float64])" if t is not None else "")
        )
    t.check_current("make an array of")
    return typing.cast("np.dtype[typing.Any]", t.numpy_dtype)
