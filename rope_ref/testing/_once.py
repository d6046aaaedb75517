"""`once` and `lazy`: attributes computed on first read and kept, at a dict entry's price.

`once` is what `functools.cached_property` does, without its lock (Python 3.11 takes one
on every first read, which a passing check pays several times). `lazy` is the same for a
dataclass field: given to the constructor, it is kept as given; omitted, it is computed
on first read. Two threads reading the same attribute at once may both compute it; each
value is a pure function of the instance, so either is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

__all__ = ["PENDING", "lazy", "once"]

Owner = TypeVar("Owner")
Value = TypeVar("Value")


class once(Generic[Owner, Value]):  # noqa: N801 (read as a decorator, like property)
    """Decorate a method of one argument: its value is computed on first read, then kept.

    The instance needs a ``__dict__`` (frozen dataclasses have one); the value is stored
    there under the method's name, where later reads find it without calling this.

    Examples
    --------
    >>> class Box:
    ...     calls = 0
    ...     @once
    ...     def area(self) -> int:
    ...         Box.calls += 1
    ...         return 6
    >>> box = Box()
    >>> box.area, box.area, Box.calls
    (6, 6, 1)
    """

    def __init__(self, compute: Callable[[Owner], Value]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> once[Owner, Value]: ...

    @overload
    def __get__(self, instance: Owner, owner: type[Any] | None = None) -> Value: ...

    def __get__(self, instance: Owner | None, owner: type[Any] | None = None) -> Any:
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value


#: What a `lazy` field holds until it is given or computed.
PENDING: Any = type("Pending", (), {"__repr__": lambda self: "<pending>"})()


class lazy(Generic[Owner, Value]):  # noqa: N801 (read as a field default, like field())
    """A dataclass field that, when the constructor is not given it, is computed on first read.

    Written as the field's default (``error: lazy[Comparison, F64] = lazy(compute)``): a
    value given to the constructor (or to `dataclasses.replace`) is kept as given; an
    omitted one is ``compute(instance)``, computed on first read and kept in the
    instance's ``__dict__``. Frozen dataclasses set their fields through
    ``object.__setattr__``, which calls `__set__` here.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> def double(box: "Box") -> int:
    ...     return 2 * box.side
    >>> @dataclass(frozen=True)
    ... class Box:
    ...     side: int
    ...     twice: lazy["Box", int] = lazy(double)
    >>> Box(3).twice, Box(3, twice=5).twice
    (6, 5)
    """

    def __init__(self, compute: Callable[[Owner], Value]) -> None:
        self.compute = compute
        self.name = compute.__name__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Value: ...

    @overload
    def __get__(self, instance: Owner, owner: type[Any] | None = None) -> Value: ...

    def __get__(self, instance: Owner | None, owner: type[Any] | None = None) -> Any:
        if instance is None:
            return PENDING  # the field's default, as dataclasses read it
        stored = instance.__dict__
        value = stored.get(self.name, PENDING)
        if value is PENDING:
            value = self.compute(instance)
            stored[self.name] = value
        return value

    def __set__(self, instance: Owner, value: Value) -> None:
        instance.__dict__[self.name] = value
