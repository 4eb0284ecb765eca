"""The one exception hierarchy of pyebpf.

Every error pyebpf raises derives from :class:`PyebpfError`; each also derives
from the built-in exception a Python user would expect (``ValueError`` for bad
input, ``OSError`` for a failed system call), so ``except ValueError`` keeps
working.  Messages say what was wrong, where, and what to try.
"""
from __future__ import annotations

import errno as _errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable


class PyebpfError(Exception):
    """Base class of every pyebpf error."""


def close_matches(word: str, candidates: "Iterable[str]", n: int = 3,
                  cutoff: float = 0.6) -> list[str]:
    """The candidates closest to ``word`` (``difflib.get_close_matches``), for
    "did you mean" hints; difflib is imported on the first call, which is an
    error path (importing it up front cost every start-up ~5 ms)."""
    import difflib
    return difflib.get_close_matches(word, candidates, n=n, cutoff=cutoff)


# --------------------------------------------------------------------------
# Pure (no kernel) errors

class EncodingError(PyebpfError, ValueError):
    """An instruction cannot be encoded, or bytes do not decode to one.

    ``index`` is the slot index in the program when known.
    """

    def __init__(self, message: str, index: int | None = None, origin: str | None = None):
        self.index = index
        self.origin = origin
        where = []
        if origin:
            where.append(origin)
        if index is not None:
            where.append(f"insn {index}")
        super().__init__(f"{': '.join(where)}: {message}" if where else message)
        self.reason = message


class AssemblyError(PyebpfError, ValueError):
    """A line of text assembly could not be parsed.

    The message names ``file:line:column``, repeats the line and puts a caret
    under the column, like a compiler does.
    """

    def __init__(self, message: str, filename: str = "<string>", line: int = 0,
                 column: int = 1, text: str | None = None):
        self.reason = message
        self.filename = filename
        self.line = line
        self.column = column
        self.text = text
        loc = f"{filename}:{line}:{column}"
        body = f"{loc}: error: {message}"
        if text is not None:
            shown = text.rstrip("\n").expandtabs(1)
            body += f"\n    {shown}\n    {' ' * max(column - 1, 0)}^"
        super().__init__(body)


class OptionError(PyebpfError, ValueError):
    """A function or command was given an option it does not know or accept
    (an unknown dialect or style, a map used the wrong way); the message
    lists what it takes."""


class ProgramError(PyebpfError, ValueError):
    """A DSL program is inconsistent: an undefined label, a jump that does not
    fit in 16 bits, a stack frame over 512 bytes, a helper given the wrong
    kind of argument.  ``origin`` is the ``file:line`` that emitted the
    offending instruction.
    """

    def __init__(self, message: str, origin: str | None = None):
        self.reason = message
        self.origin = origin
        super().__init__(f"{origin}: {message}" if origin else message)


class UsdtError(PyebpfError, ValueError):
    """Base of the USDT (``.note.stapsdt``) errors: see the three below."""


class UsdtNoteError(UsdtError):
    """An ELF file or one of its ``.note.stapsdt`` notes is malformed or unusable:
    not ELF, a truncated or inconsistent header, a note descriptor too short
    or missing a NUL, a probe address outside every executable PT_LOAD
    segment, a semaphore outside every writable one.

    ``path`` is the file, ``note`` the note's ordinal among the file's
    stapsdt notes and ``offset`` the note's file offset, when known.
    """

    def __init__(self, message: str, path: str | None = None, note: int | None = None,
                 offset: int | None = None, probe: str | None = None):
        self.reason = message
        self.path = path
        self.note = note
        self.offset = offset
        self.probe = probe
        where = []
        if path:
            where.append(str(path))
        if probe:
            where.append(f"probe {probe}")
        if note is not None:
            where.append(f"stapsdt note #{note}" + (f" at file offset {offset:#x}"
                                                     if offset is not None else ""))
        super().__init__(f"{': '.join(where)}: {message}" if where else message)


class UsdtSpecError(UsdtError):
    """A USDT argument spec (``-4@8(%rdi)``, ``8@[x0, 16]``...) cannot be decoded.

    ``spec`` is the text, ``arch`` the architecture it was read for,
    ``expected`` the forms that architecture accepts, ``probe``
    (``provider:name``) and ``index`` (0-based argument number) when known.
    """

    def __init__(self, reason: str, spec: str | None = None, arch: str | None = None,
                 expected: str | None = None, probe: str | None = None,
                 index: int | None = None):
        # (duplicates: deliberate, one attribute a line as in VerifierError and Insn)
        self.reason = reason
        self.spec = spec
        self.arch = arch
        self.expected = expected
        self.probe = probe
        self.index = index
        head = []
        if probe:
            head.append(f"probe {probe}")
        if index is not None:
            head.append(f"argument {index}")
        text = ", ".join(head)
        if spec is not None:
            text += (" " if text else "") + f"spec {spec!r}"
        if arch:
            text += f" ({arch})"
        text = f"{text}: {reason}" if text else reason
        if expected:
            text += f"; expected {expected}"
        super().__init__(text)

    def with_context(self, probe: str | None = None, index: int | None = None) -> "UsdtSpecError":
        """A copy of this error that also names the probe and argument index."""
        return UsdtSpecError(self.reason, self.spec, self.arch, self.expected,
                             probe if probe is not None else self.probe,
                             index if index is not None else self.index)


class UsdtTargetError(UsdtError):
    """A USDT target (a path, a library name such as ``libc``, a process id)
    cannot be found or read."""


# --------------------------------------------------------------------------
# Kernel errors

#: errnos of the kernel's own that libc has no name for (bpf() returns ENOTSUPP
#: for a program type that cannot be test-run, a helper the JIT lacks...)
_KERNEL_ERRNOS = {524: ("ENOTSUPP", "Operation is not supported")}


class KernelError(PyebpfError, OSError):
    """A system call failed.  ``errno`` is set; ``hint`` says what to try."""

    def __init__(self, err: int, operation: str, detail: str = "", hint: str = ""):
        self.operation = operation
        self.detail = detail
        self.hint = hint
        name, said = _KERNEL_ERRNOS.get(err, (_errno.errorcode.get(err, err), os.strerror(err)))
        text = f"{operation}: {said} ({name})"
        if detail:
            text += f": {detail}"
        if hint:
            text += f"\n  hint: {hint}"
        OSError.__init__(self, err, text)

    def __str__(self) -> str:  # OSError's default prints "[Errno N] ..."
        return self.strerror or ""


class PermissionDeniedError(KernelError):
    """EPERM/EACCES outside the verifier: missing CAP_BPF/CAP_PERFMON or a
    sysctl that forbids the operation."""


class NotSupportedError(KernelError):
    """The running kernel lacks the map type, program type, helper or attach
    type asked for (EINVAL/EOPNOTSUPP/ENOTSUPP where it means that)."""


class ResourceLimitError(KernelError):
    """Out of memory, memlock limit or file descriptors (ENOMEM/EMFILE/E2BIG)."""


class MapError(PyebpfError):
    """Base for map-level errors that are not plain syscall failures."""


class MapKeyError(MapError, KeyError):
    """A key is absent (the dict-like API raises this like ``dict`` does)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "key not found"


class MapFullError(MapError, KernelError):
    """The map has no room for a new element (E2BIG on update)."""


class SizeError(MapError, ValueError):
    """A key or value does not have the size the map expects (checked before
    any system call)."""


class WrongTypeError(SizeError, TypeError):
    """A key or value is of a type the map or record does not take (a
    ``str`` for a ``u32``): the message says which type it wants.  A
    :class:`SizeError` (what pyebpf raised for it before) and a ``TypeError``."""


class VerifierError(KernelError):
    """The kernel's verifier rejected a program.

    Attributes:
        log: the whole verifier log (it can be megabytes: the message only
            points to it).
        summary: the message without that pointer.
        index: the instruction index the verifier complained about (or None).
        origin: the source (``file.py:line`` or ``file.s:line``) that emitted
            that instruction (or None).
        message: the verifier's own words for the failure.
        instruction: the failing instruction as text, when known.
        context: the instructions around it, each with its slot index and
            source line, the failing one marked ``-->`` (when known); the
            message shows it.
    """

    def __init__(self, err: int, log: str, message: str, index: int | None = None,
                 origin: str | None = None, instruction: str | None = None,
                 hint: str = "", context: str | None = None):
        self.log = log
        self.context = context
        self.message = message
        self.index = index
        self.origin = origin
        self.instruction = instruction
        parts = []
        if origin:
            parts.append(f"{origin}: ")
        parts.append("verifier rejected the program")
        if index is not None:
            parts.append(f" at instruction {index}")
        if instruction:
            parts.append(f" ({instruction})")
        parts.append(f": {message}")
        KernelError.__init__(self, err, "BPF_PROG_LOAD", "".join(parts), hint)
        # the KernelError text starts with the operation name; keep ours first
        tail = "\n  hint: " + hint if hint else ""
        #: the message without the pointer to the log (the command line
        #: writes the log to a file and names it instead)
        self.summary = "".join(parts) + tail
        shown = "\n" + "\n".join("  " + line for line in context.splitlines()) if context else ""
        self.strerror = (self.summary + shown
                         + "\n  (the full log is in the exception's .log attribute)")


class AttachError(KernelError):
    """A probe or link could not be attached."""


class LostEventsWarning(UserWarning):
    """Events were lost (ring full); the counts are on the reader."""


class BtfWarning(UserWarning):
    """The kernel refused the BTF pyebpf adds to its own maps and programs
    (key/value types, line info), or the BTF of a clang-built object: they
    were created without it (said once, with the kernel's reason)."""


class UsdtProbeLookupError(UsdtTargetError, LookupError):
    """A USDT probe is not in the target (or its bare name matches several
    providers).  The message lists the probes that exist, close matches
    first; ``candidates`` holds them (``provider:name``), ``probe`` the name
    asked for and ``target`` where it was looked for."""

    def __init__(self, message: str, probe: str | None = None, target: str | None = None,
                 candidates: "list[str] | tuple[str, ...]" = ()):
        self.probe = probe
        self.target = target
        self.candidates = list(candidates)
        super().__init__(message)


class UnknownNameError(PyebpfError, KeyError):
    """A name is not in one of pyebpf's tables: a helper (or helper id), a
    tracepoint field, a program or constant name.  The message lists what
    exists or the closest names.  It is a ``KeyError``, as the plain one it
    replaces was, so ``except KeyError`` keeps working."""

    def __str__(self) -> str:  # KeyError's default would repr() the message
        return str(self.args[0]) if self.args else "unknown name"


class ArgumentTypeError(PyebpfError, TypeError):
    """An argument has a type the function does not take (a probe location
    that is not a name, an offset or a Location; a reader given a map that
    is not the kind it reads).  The message names the types it takes."""


class StateError(PyebpfError, RuntimeError):
    """An object was asked for something its current state does not allow
    (a reader that already runs its background thread asked to start
    another)."""
