"""Writing profiles and charts to files, never losing the data.

The format is the file name's extension (:data:`FORMATS`).  The text is
made first, then written to a temporary file beside the target and renamed
over it, so a reader never sees half a file.  When making a picture fails
(a bug, memory), the folded text is written instead -- to ``FILE.folded``
beside the requested file -- and a :class:`ProfileWriteError` says where it
went: what was collected is never lost to a drawing error.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from ..errors import OptionError, PyebpfError
from .folded import Stacks, folded_text

__all__ = ["FORMATS", "ProfileWriteError", "format_of", "render", "write_profile",
           "write_histogram", "write_text", "write_fallback"]

#: extension -> format name
FORMATS = {".svg": "svg", ".folded": "folded", ".txt": "folded", ".json": "speedscope"}


class ProfileWriteError(PyebpfError):
    """A picture could not be made; ``saved`` is where the folded text went
    instead (None when that failed too)."""

    def __init__(self, message: str, saved: str | None = None) -> None:
        super().__init__(message)
        self.saved = saved


def format_of(path: str) -> str:
    """The format :data:`FORMATS` gives ``path``'s extension; OptionError when none."""
    ext = os.path.splitext(path)[1].lower()
    try:
        return FORMATS[ext]
    except KeyError:
        raise OptionError(f"{path}: unknown output format {ext or '(no extension)'!r}; use "
                          f"one of {', '.join(sorted(set(FORMATS)))}") from None


def render(stacks: Stacks, fmt: str, title: str = "Flame graph", subtitle: str = "") -> str:
    """``stacks`` as the text of ``fmt`` (``svg``, ``folded``, ``speedscope``)."""
    if fmt == "folded":
        return folded_text(stacks)
    if fmt == "svg":
        from .flamegraph import flamegraph_svg
        return flamegraph_svg(stacks, title, subtitle=subtitle)
    if fmt == "speedscope":
        from .speedscope import speedscope_json
        return speedscope_json(stacks, title)
    raise OptionError(f"unknown profile format {fmt!r}")


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError) and exc.filename == tmp and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, path) from None   # (name the file asked for)
        raise


def write_fallback(text: str, stem: str = "pyebpf-profile", suffix: str = ".folded") -> str:
    """Write ``text`` to a new file in the temporary directory (``$TMPDIR``,
    else ``/tmp``) named ``STEM-PID-XXXXXXXX.SUFFIX`` -- created anew, never
    an existing file or link followed -- and return its path: where the data
    goes when neither the file asked for nor standard output takes it.
    OSError when it cannot be written either (the file is then removed)."""
    import tempfile
    fd, path = tempfile.mkstemp(prefix=f"{stem}-{os.getpid()}-", suffix=suffix)
    try:
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    return path


def write_profile(stacks: Stacks, path: str, title: str = "Flame graph", subtitle: str = "",
                  fmt: str | None = None) -> str:
    """Write ``stacks`` to ``path`` in the format of its extension (or ``fmt``);
    returns the format written.  See the module docs for what happens when
    drawing fails (:class:`ProfileWriteError`)."""
    fmt = fmt or format_of(path)
    return _write(path, fmt, lambda: render(stacks, fmt, title, subtitle),
                  lambda: folded_text(stacks))


def write_histogram(buckets: Mapping[int, int], path: str, title: str = "Histogram", *,
                    label: Callable[[int], str] | None = None, unit: str = "") -> None:
    """Write the SVG chart of ``{bucket: count}`` to ``path`` (see
    :func:`~pyebpf.draw.chart.histogram_svg`); when drawing fails the
    counts land in ``path.txt`` (``bucket count`` lines) and
    :class:`ProfileWriteError` is raised."""
    from .chart import histogram_svg
    _write(path, "svg", lambda: histogram_svg(buckets, title, label=label, unit=unit),
           lambda: "".join(f"{b} {c}\n" for b, c in sorted(buckets.items())), ".txt")


def _write(path: str, fmt: str, make: Callable[[], str], fallback: Callable[[], str],
           suffix: str = ".folded") -> str:
    try:
        text = make()
    except Exception as exc:
        if fmt == "folded":
            raise
        saved: str | None = path + suffix
        try:
            write_text(path + suffix, fallback())
        except OSError:
            saved = None
        where = f"the data was written to {saved}" if saved else "the data could not be saved"
        raise ProfileWriteError(f"{path}: drawing failed ({type(exc).__name__}: {exc}); "
                                f"{where}", saved) from exc
    write_text(path, text)
    return fmt
