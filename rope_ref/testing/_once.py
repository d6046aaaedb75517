"""`once`: an attribute computed on first read and kept, at the price of a dict entry.

What `functools.cached_property` does, without its lock (Python 3.11 takes one on every
first read, which a passing check pays several times). Two threads reading the same
attribute at once may both compute it; each value is a pure function of the instance,
so either is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

__all__ = ["once"]

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
