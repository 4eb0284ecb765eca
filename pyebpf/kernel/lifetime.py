"""The lifetime of everything that owns kernel objects: :class:`Owner`.

Every pyebpf object that holds file descriptors (an :class:`~.core.Fd`, a
map, a loaded program, a link, an event reader, a trace session...) derives
from :class:`Owner`, which gives it, once for all of them:

* ``close()`` -- idempotent, safe to call from several threads and again
  from inside its own teardown;
* ``with`` blocks (``__enter__`` returns the object, ``__exit__`` closes);
* closing on garbage collection: a :class:`weakref.finalize` that holds the
  *resources* (never the object, which would then never be collected) and
  releases them when the object is collected, or at interpreter exit;
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

This module imports nothing but :mod:`os` and :mod:`weakref`: every layer may
use it, without the cffi backend.
"""
from __future__ import annotations

import os
import weakref

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
        self._finalizer = weakref.finalize(self, _release, release or _nothing, args)

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
