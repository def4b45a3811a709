"""`value_class`: a frozen dataclass made without the dataclasses module.

The model's value objects (`Problem`, `Interval`, `Job` and its parts, `Catalog`) are frozen
dataclasses to their users: ``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``
and ``FrozenInstanceError`` work on them as on any. Made by ``@dataclass``, though, they cost
every start of the command line the dataclasses module (which imports `inspect`, and with it
the ast, dis and tokenize modules) and the compiling of each class's methods from their source
text: about a quarter of ``jobscheduler validate``. So `value_class` gives a class the same
methods, written once here (no text compiled), and the dataclasses module's view of the class
(``__dataclass_fields__``, ``__dataclass_params__``) is made when first asked for, by
``dataclasses.make_dataclass`` over the same fields, so it is the module's own.

What it supports, all the model needs: a frozen class with its own ``__init__`` (which sets
its fields with ``object.__setattr__``), equality and a hash over every field in order, the
dataclass's ``repr``, ``__match_args__``; a field's default written as the class attribute,
or as `field` (``default``, ``default_factory``, ``metadata``). A method the class defines
itself is kept, as ``@dataclass`` keeps it.

The type checker reads `value_class` and `field` as ``dataclasses.dataclass`` and
``dataclasses.field``: a class is declared ``@value_class(frozen=True, init=False)``.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from dataclasses import dataclass as value_class
    from dataclasses import field

__all__ = ["ValueField", "field", "field_names", "replaced", "value_class", "value_fields"]

T = TypeVar("T")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class FieldSpec:
    """A field's default declared with `field`, until `value_class` reads it."""

    __slots__ = ("default", "default_factory", "metadata")

    def __init__(
        self, default: Any, default_factory: Any, metadata: Mapping[str, Any] | None
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.metadata = metadata


class ValueField:
    """One field of a value class: its name, its annotation (text) and its default."""

    __slots__ = ("annotation", "default", "default_factory", "metadata", "name")

    def __init__(self, name: str, annotation: Any, declared: Any) -> None:
        self.name = name
        self.annotation = annotation
        spec = declared if isinstance(declared, FieldSpec) else None
        self.default = declared if spec is None else spec.default
        self.default_factory = _MISSING if spec is None else spec.default_factory
        self.metadata = None if spec is None else spec.metadata

    def dataclass_field(self) -> Any:
        """The ``dataclasses.field`` this field is."""
        import dataclasses

        options: dict[str, Any] = {}
        if self.default is not _MISSING:
            options["default"] = self.default
        if self.default_factory is not _MISSING:
            options["default_factory"] = self.default_factory
        if self.metadata is not None:
            options["metadata"] = self.metadata
        return dataclasses.field(**options)


_FIELDS = "__value_fields__"


def field_names(cls: type) -> tuple[str, ...]:
    """The names of the fields of value class `cls` (or of an instance's class), in order:
    what ``dataclasses.fields`` names, without importing dataclasses."""
    fields: tuple[ValueField, ...] = getattr(cls, _FIELDS)
    return tuple(f.name for f in fields)


def value_fields(cls: type) -> tuple[ValueField, ...]:
    """The fields of value class `cls`, in order (each with its `name` and the `metadata`
    given to `field`, else None)."""
    fields: tuple[ValueField, ...] = getattr(cls, _FIELDS)
    return fields


def replaced(obj: T, **changes: Any) -> T:
    """A copy of value object `obj` with `changes`, made by its class's constructor:
    ``dataclasses.replace`` without importing dataclasses."""
    names = field_names(obj.__class__)
    unknown = changes.keys() - set(names)
    if unknown:
        raise TypeError(f"{obj.__class__.__name__} has no field {sorted(unknown)[0]!r}")
    values = {name: changes[name] if name in changes else getattr(obj, name) for name in names}
    return obj.__class__(**values)


class _DataclassView:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of a value class, made the first
    time either is read (by dataclasses' functions)."""

    def __init__(self, owner: type, attribute: str) -> None:
        self.owner = owner
        self.attribute = attribute

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return getattr(_dataclass_twin(self.owner), self.attribute)


_TWINS: dict[type, type] = {}


def _dataclass_twin(cls: type) -> type:
    """A dataclass of the same fields as value class `cls` (made once): what the dataclasses
    module knows of `cls`."""
    twin = _TWINS.get(cls)
    if twin is None:
        import dataclasses

        fields: tuple[ValueField, ...] = getattr(cls, _FIELDS)
        twin = dataclasses.make_dataclass(
            cls.__name__,
            [(f.name, f.annotation, f.dataclass_field()) for f in fields],
            frozen=True,
        )
        _TWINS[cls] = twin
    return twin


def _own_fields(cls: type) -> tuple[ValueField, ...]:
    # Not inspect.get_annotations: the point of this module is not to import inspect.
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    fields = []
    for name, annotation in annotations.items():
        if "ClassVar" in str(annotation):
            continue
        declared = cls.__dict__.get(name, _MISSING)
        fields.append(ValueField(name, annotation, declared))
        if isinstance(declared, FieldSpec):  # as @dataclass leaves it: the default, or none
            if declared.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, declared.default)
    return tuple(fields)


def frozen_error(message: str) -> Exception:
    """The error ``@dataclass(frozen=True)`` raises on an assignment (imported only then)."""
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _hash_dropped(cls: type) -> bool:
    """Whether ``__hash__`` is None only because the class defines ``__eq__`` (Python's
    doing, which ``@dataclass`` replaces), not because the class said so."""
    return cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__


def _methods(cls: type, names: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """The methods ``@dataclass(frozen=True)`` would compile for `cls`, as closures."""
    values: Callable[[Any], tuple[Any, ...]]
    if len(names) == 1:
        one = attrgetter(names[0])
        values = lambda obj: (one(obj),)  # noqa: E731
    else:
        values = attrgetter(*names)
    field_set = frozenset(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(values(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        pairs = zip(names, values(self), strict=True)
        shown = ", ".join(f"{name}={value!r}" for name, value in pairs)
        return f"{self.__class__.__qualname__}({shown})"

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in field_set:
            raise frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in field_set:
            raise frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    return {
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__repr__": __repr__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }


if not TYPE_CHECKING:

    def field(
        *,
        default: Any = _MISSING,
        default_factory: Any = _MISSING,
        metadata: Mapping[str, Any] | None = None,
    ) -> Any:
        """A field's default (or the function that makes it) and metadata, as
        ``dataclasses.field`` takes them."""
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return FieldSpec(default, default_factory, metadata)

    def value_class(*, frozen: bool = True, init: bool = False) -> Callable[[type], type]:
        """The decorator making a frozen value class (see the module notes); the class
        writes its own ``__init__``."""
        if not frozen or init:
            raise TypeError("value_class makes frozen classes with their own __init__")

        def make(cls: type) -> type:
            if "__init__" not in cls.__dict__:
                raise TypeError(f"{cls.__name__} must define its own __init__")
            if any(_FIELDS in vars(base) for base in cls.__mro__[1:]):
                raise TypeError(f"{cls.__name__}: a value class cannot derive from another")
            fields = _own_fields(cls)
            names = tuple(f.name for f in fields)
            setattr(cls, _FIELDS, fields)
            for name, method in _methods(cls, names).items():
                if name not in cls.__dict__ or (name == "__hash__" and _hash_dropped(cls)):
                    method.__qualname__ = f"{cls.__qualname__}.{name}"
                    setattr(cls, name, method)
            if "__match_args__" not in cls.__dict__:
                cls.__match_args__ = names  # type: ignore[attr-defined]
            for attribute in ("__dataclass_fields__", "__dataclass_params__"):
                setattr(cls, attribute, _DataclassView(cls, attribute))
            return cls

        return make
