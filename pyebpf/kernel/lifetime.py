"""The lifetime of everything that owns kernel objects: :class:`Owner`.

Every pyebpf object that holds file descriptors (an :class:`~.core.Fd`, a
map, a loaded program, a link, an event reader, a trace session...) derives
from :class:`Owner`, which gives it, once for all of them:

* ``close()`` -- idempotent, safe to call from several threads and again
  from inside its own teardown;
* ``with`` blocks (``__enter__`` returns the object, ``__exit__`` closes);
* closing on garbage collection: a finalizer (:class:`_Release`, the part of
  :class:`weakref.finalize` an owner needs) that holds the *resources*
  (never the object, which would then never be collected) and releases them
  when the object is collected, or at interpreter exit, the newest first;
  failures there are swallowed, not printed;
* ``closed``, and a ``repr`` that says ``closed``.

A subclass states what it owns in one of two ways (or both):

* ``self._own(release, *args)``: ``release(*args)`` frees the resources (it
  runs on ``close()`` and on garbage collection, so neither ``release`` nor
  ``args`` may refer to the object); :func:`close_all` over a list of
  closable things is the usual ``release``;
* ``_close_resources()``: the steps only an explicit ``close()`` takes (it
  may use the object: record final counts, detach in order).  Whatever
  these steps close must itself be an :class:`Owner` (or be freed by the
  kernel with its last fd), so that garbage collection releases it too.

This module imports nothing but :mod:`os`, :mod:`atexit` and ``_weakref``
(the built-in half of :mod:`weakref`, which imports ``_weakrefset``, ``types``
and ``itertools``: ~1 ms of a cold start): every layer may use it, without
the cffi backend.
"""
from __future__ import annotations

import atexit
import os
from _weakref import ref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from typing_extensions import Self

    from .core import Fd

__all__ = ["Owner", "FdOwner", "close_all", "close_fd", "close_quietly"]


def close_quietly(thing: Any) -> None:
    """``thing.close()``, any failure ignored: a teardown step must not stop
    the steps after it."""
    try:
        thing.close()
    except Exception:          # noqa: BLE001 - best effort, keep closing the rest
        pass


def close_fd(fd: int) -> None:
    """``os.close(fd)``, an fd closed already (EBADF) ignored."""
    try:
        os.close(fd)
    except OSError:
        pass


def close_all(things: list[Any]) -> None:
    """Close every item of ``things``, the last added first, and empty the list
    (which can be filled again: the owner keeps using the same list)."""
    while things:
        close_quietly(things.pop())


def _nothing() -> None:
    """The release function of an owner whose parts release themselves."""


def _release(func: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Run a release function from the garbage collector or at exit: a failure
    there has nobody to report to (and must not print while Python stops)."""
    try:
        func(*args)
    except Exception:          # noqa: BLE001 - nothing can handle it here
        pass


#: the finalizers not run yet, by id (holding them, and so their weak references)
_pending: dict[int, _Release] = {}
_at_exit: list[bool] = []       # (non-empty once _run_pending is registered)


def _run_pending() -> None:
    """At interpreter exit: run the finalizers left, the newest first (before
    the modules they use are torn down)."""
    while _pending:
        _, f = _pending.popitem()
        _release(*f._drop())


class _Release:
    """``release(*args)`` to run once: when ``owner`` is garbage collected, at
    interpreter exit, or by whoever :meth:`detach` es it first (the parts of
    :class:`weakref.finalize` an :class:`Owner` uses)."""

    __slots__ = ("_ref", "_func", "_args")

    def __init__(self, owner: object, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._func: Any = func
        self._args: Any = args
        self._ref: Any = ref(owner, self._collected)
        if not _at_exit:
            _at_exit.append(True)
            atexit.register(_run_pending)
        _pending[id(self)] = self

    def _drop(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The release function and its arguments, no longer held here (nor
        the weak reference: the resources go as soon as they are released)."""
        func, args = self._func, self._args
        self._func = self._args = self._ref = None
        return func, args

    def _collected(self, _ref: object) -> None:
        if _pending.pop(id(self), None) is not None:
            _release(*self._drop())

    def detach(self) -> tuple[Any, Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None:
        """``(owner, func, args, kwargs)`` and never run, if not run or
        detached yet (exactly one caller gets it); else None."""
        if _pending.pop(id(self), None) is None:
            return None
        owner = self._ref()
        return owner, _release, self._drop(), {}

    @property
    def alive(self) -> bool:
        """True until run or detached."""
        return id(self) in _pending


class Owner:
    """Base of every object that owns kernel objects; see the module docs.

    Subclasses call :meth:`_own` in their constructor (before the first
    resource is acquired, so that a failing constructor leaves nothing
    behind) and/or override :meth:`_close_resources`.
    """

    __slots__ = ("_finalizer", "__weakref__")

    def _own(self, release: Callable[..., Any] | None = None, *args: Any) -> None:
        """Register ``release(*args)`` as what frees this object's resources
        (None: only :meth:`_close_resources`, whose parts release themselves).

        Called again after :meth:`close`, it makes the object open again (for
        owners that can be reused, like a trace whose maps are re-created).
        """
        self._finalizer = _Release(self, release or _nothing, args)

    def _disown(self) -> None:
        """Stop owning the resources without releasing them (another owner
        took them over); the object counts as closed."""
        f = getattr(self, "_finalizer", None)
        if f is not None:
            f.detach()

    def _close_resources(self) -> None:
        """The steps of an explicit :meth:`close` before the release
        function runs (none by default)."""

    @property
    def closed(self) -> bool:
        """True once closed (or never opened)."""
        f = getattr(self, "_finalizer", None)
        return f is None or not f.alive

    def close(self) -> None:
        """Release everything this object owns; does nothing the second time."""
        f = getattr(self, "_finalizer", None)
        if f is None:
            return
        state = f.detach()          # atomic: exactly one caller gets it
        if state is None:
            return
        _, _, args, _ = state
        try:
            self._close_resources()
        finally:
            release, rargs = args
            release(*rargs)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _describe(self) -> str:
        """What ``repr`` shows of an open object (subclasses: more)."""
        return "open"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} ({'closed' if self.closed else self._describe()})>"


class FdOwner(Owner):
    """An :class:`Owner` of one kernel object through one :class:`~.core.Fd`
    (a map, a loaded program): :attr:`fd` and :meth:`fileno` give its number,
    closing the owner closes it."""

    _fd: Fd

    def _own_fd(self, fd: Fd) -> None:
        """Take ``fd`` as what this object owns."""
        self._fd = fd
        self._own(fd.close)

    @property
    def fd(self) -> int:
        """The file descriptor number (what a program or the kernel is given);
        :class:`~pyebpf.errors.KernelError` (EBADF) once closed."""
        return self._fd.fileno()

    def fileno(self) -> int:
        """Same as :attr:`fd` (for :mod:`select` and the like)."""
        return self._fd.fileno()
