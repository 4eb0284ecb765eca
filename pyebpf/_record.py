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

``@dataclass``, ``field`` and ``replace`` are, likewise, the part of
:mod:`dataclasses` the start-up path uses (mutable classes: the bpftrace
language's tree), without importing it; to a type checker they *are* the
standard ones.
"""
from __future__ import annotations

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
        # (imported here: collections costs a cold start ~1.5 ms, and the modules
        # of the object loading path define no record; see tests/objects/test_objects_lean.py)
        from collections import namedtuple
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
    from operator import methodcaller   # (here: see _first_key)
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


# ------------------------------------------------------------ @dataclass
# ``dataclasses`` imports ``inspect`` (with ``dis``, ``ast``, ``tokenize``...):
# ~10 ms, and each ``@dataclass`` then compiles three methods (~0.15 ms a
# class).  The bpftrace language's tree has 30 node classes and is on every
# ``pyebpf bt`` start; this is the part of dataclasses it uses.

if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass, field as field, replace as replace
else:
    class _Field:
        """What :func:`field` returns: a default (value or factory), keyword-only or not."""

        __slots__ = ("default", "factory", "kw_only")

        def __init__(self, default: Any, factory: Any, kw_only: bool) -> None:
            self.default, self.factory, self.kw_only = default, factory, kw_only

    _NO_DEFAULT = object()

    def field(*, default: Any = _NO_DEFAULT, default_factory: Any = None,
              kw_only: bool = False, compare: bool = True) -> Any:
        """A field's default (``default`` or ``default_factory``), as
        ``dataclasses.field``; ``compare`` is accepted and ignored (the
        ``@dataclass`` here compares every field or none)."""
        return _Field(default, default_factory, kw_only)

    def dataclass(cls: Any = None, *, frozen: bool = False, eq: bool = True) -> Any:
        """``@dataclass``, ``@dataclass(eq=False)``, ``@dataclass(frozen=True)``:
        the subset of :func:`dataclasses.dataclass` pyebpf's start-up path uses
        -- an ``__init__`` (fields of the bases first; ``field(kw_only=True)``
        ones keyword-only, last; ``__post_init__`` called), a ``__repr__``,
        with ``eq`` (and ``frozen``) ``__eq__`` and ``__hash__`` by the fields (a
        class's own ``__hash__`` kept),
        with ``frozen`` no assignment.  ``_fields`` is the field names, in order.
        The ``__init__`` is compiled on the first instance (a tree's node
        classes are many; a script uses a few)."""
        def wrap(c: Any) -> Any:
            return _make_dataclass(c, frozen, eq)
        return wrap if cls is None else wrap(cls)

    def _make_dataclass(cls: Any, frozen: bool, eq: bool) -> Any:
        specs: dict[str, _Field] = dict(getattr(cls, "_field_specs", {}))
        for name in cls.__dict__.get("__annotations__", {}):
            value = cls.__dict__.get(name, _NO_DEFAULT)
            if isinstance(value, _Field):
                spec = value
                if value.default is _NO_DEFAULT or value.factory is not None:
                    delattr(cls, name)        # (no class attribute: no default value)
                else:
                    setattr(cls, name, value.default)
            else:
                spec = _Field(value, None, False)
            specs[name] = spec
        cls._field_specs = specs
        cls._fields = (tuple(n for n, f in specs.items() if not f.kw_only)
                       + tuple(n for n, f in specs.items() if f.kw_only))
        own = cls.__dict__
        if "__init__" not in own:
            cls.__init__ = _first_init(cls)
        if "__repr__" not in own:
            cls.__repr__ = _repr
        if eq and "__eq__" not in own:
            cls._key = staticmethod(_first_key(cls))
            cls.__eq__ = _eq
            if "__hash__" not in own:          # (an explicit one is kept, as dataclasses does)
                cls.__hash__ = _hash if frozen else None
        if frozen:
            cls.__setattr__ = _frozen_setattr
            cls.__delattr__ = _frozen_setattr
        return cls

    def _first_init(cls: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            init = _compile_init(cls)
            if cls.__dict__.get("__init__") is __init__:
                cls.__init__ = init
            init(self, *args, **kwargs)
        __init__.__qualname__ = f"{cls.__qualname__}.__init__"
        return __init__

    def _compile_init(cls: Any) -> Any:
        """``cls``'s ``__init__``, generated from its fields."""
        specs: dict[str, _Field] = cls._field_specs
        frozen = cls.__setattr__ is _frozen_setattr
        ns: dict[str, Any] = {"_set": object.__setattr__, "_NO_DEFAULT": _NO_DEFAULT}
        params, kw_params, body = [], [], []
        for name in cls._fields:
            spec = specs[name]
            if spec.factory is not None:
                ns[f"_f_{name}"] = spec.factory
                param = f"{name}=_NO_DEFAULT"
                value = f"_f_{name}() if {name} is _NO_DEFAULT else {name}"
            elif spec.default is not _NO_DEFAULT:
                ns[f"_d_{name}"] = spec.default
                param, value = f"{name}=_d_{name}", name
            else:
                param, value = name, name
            (kw_params if spec.kw_only else params).append(param)
            body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
        if hasattr(cls, "__post_init__"):
            body.append("self.__post_init__()")
        signature = ", ".join(["self", *params, *(["*", *kw_params] if kw_params else [])])
        src = f"def __init__({signature}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
        exec(src, ns)
        init = ns["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        return init

    def replace(obj: Any, **changes: Any) -> Any:
        """A copy of ``obj`` (a :func:`dataclass` instance) with ``changes``
        (``dataclasses.replace``)."""
        values = {n: getattr(obj, n) for n in obj._field_specs}
        values.update(changes)
        return type(obj)(**values)

    def _first_key(cls: Any) -> Callable[[Any], Any]:
        """The key ``__eq__``/``__hash__`` compare for ``cls``, which on first
        use puts ``operator.attrgetter(*fields)`` in its place (importing
        :mod:`operator` costs a cold start ~0.3 ms; loading an object never
        compares its BTF types)."""
        def key(obj: Any) -> Any:
            from operator import attrgetter
            real = attrgetter(*cls._fields) if cls._fields else staticmethod(_no_fields)
            cls._key = real
            return cls._key(obj)
        return key

    def _no_fields(obj: Any) -> tuple[()]:
        return ()

    def _repr(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._field_specs)
        return f"{type(self).__qualname__}({inner})"

    def _eq(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key(self) == self._key(other)  # type: ignore[no-any-return]

    def _hash(self: Any) -> int:
        return hash(self._key(self))

    def _frozen_setattr(self: Any, name: str, *value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen "
                             f"{type(self).__qualname__}")


__all__ = ["Record", "record", "keyed_by", "dataclass", "field", "replace"]
