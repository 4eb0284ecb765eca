"""``@record``: ``typing.NamedTuple``-style classes without importing typing.

Write a record as a class deriving from :class:`Record`, with annotated fields
(defaults after the fields without), docstring, properties and methods::

    @record
    class Segment(Record):
        vaddr: int
        flags: int = 0

        @property
        def executable(self) -> bool: ...

and get what ``class Segment(NamedTuple)`` gives: a tuple subclass with
named fields, ``_replace``, ``_asdict``, ``_fields``, equality and hashing as
tuples, pickling.  ``typing`` (with the ``re``, ``enum`` and ``contextlib`` it
imports) costs every interpreter ~10 ms to import, and its ``NamedTuple`` ~0.2 ms
per class; pyebpf's start-up path has a score of records.

To a type checker :class:`Record` *is* ``typing.NamedTuple`` and ``record`` is
the identity, so it sees each record as the named tuple it is at run time
(constructor, field types, ``_replace``, unpacking).
"""
from __future__ import annotations

from collections import namedtuple
from operator import methodcaller

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as Record
    from typing import Any, Callable, TypeVar

    _C = TypeVar("_C")
    _T = TypeVar("_T", bound=type)

    def record(cls: _C) -> _C:
        """Turn ``cls`` (annotated fields, optional defaults) into a named tuple class."""
else:
    class Record:
        """Base of a :func:`record` class (at run time a marker; replaced by the named tuple)."""

        __slots__ = ()

    def record(cls: type) -> type:
        """Turn ``cls`` (annotated fields, optional defaults) into a named tuple class."""
        ns = dict(cls.__dict__)
        fields = list(ns.get("__annotations__", {}))
        defaults = []
        for name in fields:
            if name in ns:
                defaults.append(ns.pop(name))
            elif defaults:
                raise TypeError(f"{cls.__qualname__}: field {name!r} without a default "
                                "follows a field with one")
        ns.pop("__dict__", None)
        ns.pop("__weakref__", None)
        ns["__slots__"] = ()
        base = namedtuple(cls.__name__, fields, defaults=defaults or None,
                          module=cls.__module__)
        new = type(cls.__name__, (base,), ns)
        new.__qualname__ = cls.__qualname__
        return new

def keyed_by(method: str) -> Callable[[_T], _T]:
    """A class decorator: ``__eq__`` and ``__hash__`` by the tuple the
    ``method`` named returns (looked up on each instance, so a subclass may
    redefine it).  An instance equals any instance of the decorated class or
    of a subclass whose key is equal; anything else is ``NotImplemented``."""
    key = methodcaller(method)

    def decorate(cls: _T) -> _T:
        def __eq__(self: Any, other: object) -> bool:
            if not isinstance(other, cls):
                return NotImplemented
            return key(self) == key(other)  # type: ignore[no-any-return]

        def __hash__(self: Any) -> int:
            return hash(key(self))

        cls.__eq__ = __eq__  # type: ignore[assignment,method-assign]
        cls.__hash__ = __hash__  # type: ignore[assignment,method-assign]
        return cls

    return decorate


__all__ = ["Record", "record", "keyed_by"]
