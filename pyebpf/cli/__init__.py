"""``python -m pyebpf`` / ``pyebpf``: the command line.

Thin by design: each sub-command lives in its own module of this package,
declares its arguments in ``register(subparsers)`` and imports the heavy
layers only when it runs, so that ``--help`` and start-up stay fast.

Every failure ends as one line ``pyebpf COMMAND: message`` on standard error
(never a traceback) and an exit status: 0 success, 1 failure (bad input,
kernel refusal, or an internal error), 2 usage error, 130 on Ctrl-C.  An
internal error (a bug) is reported by its type and message with a hint:
``PYEBPF_DEBUG=1`` prints the traceback too.

Ctrl-C is handled deliberately.  ``pyebpf/__init__`` (the first pyebpf code
that runs, for ``python -m pyebpf`` and for the console script alike) calls
:func:`take_sigint`, whose handler only records a Ctrl-C during the imports;
:func:`entry` (the process's entry point) then exits 130 at once if one came,
else arms the handler: a Ctrl-C raises :class:`KeyboardInterrupt` (which
stops a trace and prints its results) until the exit has begun, after which
Ctrl-C is ignored.  A process that saw a Ctrl-C leaves through ``os._exit``
after flushing its output: CPython would otherwise kill itself with SIGINT at
exit when the interrupt had gone through an ``eval``/``exec`` of the standard
library (namedtuple, dataclasses), and report -2 instead of 130.  (A Ctrl-C in
the first milliseconds, while the Python interpreter itself starts and before
any pyebpf code runs, gets Python's own behaviour.)  A SIGINT ignored when the
process started (a background job of a script) stays ignored, as Python
leaves it -- except while a trace runs: :class:`StopSignals` then takes SIGINT
and SIGTERM, and from the first probe attached a stop signal always ends with
the results printed (see :mod:`pyebpf.cli.runner`).
"""
from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from types import FrameType
    from typing import Any, Callable, NoReturn

    from ..errors import VerifierError
    from ..session.live import Child

    from .parser import Parser
else:
    try:    # the C module alone: the signal module's enums (enum) cost every start ~3 ms
        import _signal as signal
    except ImportError:
        import signal

# Sub-command modules, in the order --help lists them.
COMMANDS = ["demo", "asm", "disasm", "conformance", "list", "trace", "profile", "run", "bt",
            "explain", "load", "vm", "export", "object"]

#: exit statuses
OK, FAILURE, USAGE, INTERRUPTED = 0, 1, 2, 130

EPILOG = """\
exit status: 0 success, 1 failure (bad input, kernel refusal, internal error),
2 usage error, 130 interrupted (Ctrl-C).  Errors are one line on stderr,
'pyebpf COMMAND: message'; an internal error (a bug: please report it) says
so, and PYEBPF_DEBUG=1 prints its traceback.
"""

# longest line of an error message that is printed whole
_MAX_LINE = 500

_interrupted = False      # a SIGINT (or a trace's stop signal) arrived
_armed = False            # SIGINT raises KeyboardInterrupt (only inside entry's try)
_gc_held = False          # entry() turned the cyclic collector off for the start (see started())


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    _interrupted = True
    if _armed and not deferred(signum, frame):
        raise KeyboardInterrupt


def deferred(signum: int, frame: FrameType | None) -> bool:
    """For a handler about to raise KeyboardInterrupt in ``frame``: True
    when Python would print and drop that exception there (a ``__del__``,
    importlib's module-lock callback) and the command would go on; the
    signal is then simulated again 2 ms later, from a thread (simulating it
    from here would run the handler again at once), and the handler must
    not raise now."""
    if frame is None or not _unraisable(frame.f_code):
        return False
    _thread.start_new_thread(_interrupt_later, (0.002, signum))
    return True


def _interrupt_later(delay: float, signum: int) -> None:
    wait = _thread.allocate_lock()
    wait.acquire()
    wait.acquire(timeout=delay)        # a sleep that needs no import
    _thread.interrupt_main(signum)  # type: ignore[arg-type]  # (an int: _signal has no enum)


def _unraisable(code: Any) -> bool:
    """True for code whose exceptions Python drops: a ``__del__``, or a
    weakref callback that runs during imports (importlib's module locks'
    ``cb``; 3.12's ``_WeakValueDictionary`` entries' ``remove``; weakref's own
    ``remove`` callbacks)."""
    name, filename = code.co_name, code.co_filename
    return name == "__del__" or (name in ("cb", "remove") and (
        "importlib" in filename or filename.endswith("weakref.py")))


class StopSignals:
    """How SIGINT (Ctrl-C) and SIGTERM stop a trace (``pyebpf trace`` / ``run``).

    From creation, SIGTERM raises :class:`KeyboardInterrupt` as Ctrl-C does
    (before anything is attached: the command exits 130).  :meth:`hold`,
    called before the first probe is attached, takes SIGINT too -- even when
    it was ignored at start, as bpftrace does -- and from then on a stop
    signal is only recorded: it cannot cut the attaching, the start of the
    ``-c`` command or the "Attached" line.  :meth:`arm`, first thing in the
    loop's ``try``, raises at once if one came, else lets the next one raise
    (once: the first stop signal raises, later ones are recorded).  After
    the loop, :meth:`hold` again: detaching and printing the results cannot
    be interrupted.  :meth:`restore` puts the previous handlers back.
    :meth:`run` is that loop's frame: arm, release the ``-c`` command, loop,
    hold.
    """

    def __init__(self) -> None:
        self.requested = False         # a stop signal arrived
        self._raising = True
        self._old: dict[int, Any] = {}
        self._old[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        global _interrupted
        _interrupted = True
        self.requested = True
        if self._raising and not deferred(signum, frame):
            self._raising = False
            raise KeyboardInterrupt

    def hold(self) -> None:
        """From now on a stop signal is recorded, not raised (SIGINT taken)."""
        self._raising = False
        if signal.SIGINT not in self._old:
            self._old[signal.SIGINT] = signal.signal(signal.SIGINT, self._handler)

    def arm(self) -> None:
        """Raise KeyboardInterrupt if a stop signal came while held; else the
        next one raises."""
        self._raising = True
        if self.requested and self._raising:   # (one that came since raised already)
            self._raising = False
            raise KeyboardInterrupt

    def run(self, loop: Callable[[], None], child: Child | None = None,
            started: Callable[[], None] | None = None) -> None:
        """Run ``loop`` (a trace's loop) with the stop signals armed: first
        the ``-c`` command ``child`` is released (``child.go()``) and
        ``started()`` called (the trace reads the command's process then);
        a stop signal ends the loop quietly.  Returns with the stop signals
        held; the loop's other errors go through."""
        try:
            try:
                self.arm()
                if child is not None:
                    child.go()
                    if started is not None:
                        started()
                loop()
            finally:
                self.hold()
        except KeyboardInterrupt:
            pass

    def restore(self) -> None:
        """The handlers from before (SIG_IGN for a SIGINT ignored at start)."""
        while self._old:
            sig, old = self._old.popitem()
            signal.signal(sig, old)


def is_command_line() -> bool:
    """True when this process is the ``pyebpf`` command (``python -m pyebpf``
    or the console script), not a program that imports pyebpf."""
    argv: list[str] = getattr(sys, "argv", None) or [""]
    if argv[0] == "-m":                # python -m X, while X's package is imported
        orig: list[str] = getattr(sys, "orig_argv", [])
        return len(orig) >= len(argv) and orig[-len(argv)] in ("pyebpf", "-mpyebpf")
    return os.path.basename(argv[0]) == "pyebpf"


def take_sigint() -> None:
    """Called by ``pyebpf/__init__`` first thing when :func:`is_command_line`:
    from now on a Ctrl-C is recorded (not raised) until :func:`entry` runs,
    which then exits 130 -- so a Ctrl-C during the imports is no traceback.
    A SIGINT ignored when the process started (a background job of a
    script) stays ignored (a trace takes it while it runs: :class:`StopSignals`)."""
    if is_command_line():
        _take(signal.SIGINT, _on_sigint)


def _take(sig: int, handler: Callable[[int, FrameType | None], None]) -> None:
    """Set ``handler`` for ``sig`` unless ``sig`` is ignored (SIG_IGN) or
    is ours already (``take_sigint`` ran)."""
    if signal.getsignal(sig) not in (signal.SIG_IGN, handler):
        signal.signal(sig, handler)


def build_parser(only: str | None = None) -> Parser:
    """The parser of every sub-command (their modules are imported here);
    with ``only`` (a name in :data:`COMMANDS`), of that sub-command alone
    (what ``main`` builds when the command line names one: importing and
    building the others would cost every run ~10 ms)."""
    import argparse
    import importlib

    from .parser import Parser

    parser = Parser(
        prog="pyebpf",
        description="A pure-Python eBPF toolkit: assemble, load, attach and read eBPF\n"
                    "programs with no LLVM, BCC or libbpf.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"pyebpf {__version__}",
                        help="print pyebpf's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parser.commands = sub.choices      # name -> the sub-command's parser
    for name in COMMANDS if only is None else [only]:
        importlib.import_module(f"pyebpf.cli.{name}").register(sub)
    return parser


def debug() -> bool:
    """True when ``PYEBPF_DEBUG`` asks for tracebacks."""
    return os.environ.get("PYEBPF_DEBUG", "") not in ("", "0")


def shorten(text: str, limit: int = _MAX_LINE) -> str:
    """``text`` with every line longer than ``limit`` cut (a message may quote
    a whole input line, which can be megabytes long)."""
    lines = []
    for line in text.split("\n"):
        if len(line) > limit:
            line = f"{line[:limit - 40]}... ({len(line)} characters)"
        lines.append(line)
    return "\n".join(lines)


def describe_os_error(exc: OSError) -> str:
    """``PATH: reason`` for a failed file operation, else the error's text."""
    if type(exc).__str__ is OSError.__str__ and exc.strerror:
        text = exc.strerror
        if exc.filename is not None:
            text = f"{_path_text(exc.filename)}: {text}"
        if exc.filename2 is not None:
            text += f" ({_path_text(exc.filename2)})"
        return text
    return str(exc) or type(exc).__name__


def _path_text(path: object) -> str:
    return os.fsdecode(path) if isinstance(path, (str, bytes)) else str(path)


def report(command: str, message: str) -> None:
    """Print ``pyebpf COMMAND: message`` on standard error."""
    print(f"pyebpf {command}: {shorten(message)}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and return its
    exit status (also for ``--help`` and usage errors: no SystemExit); every
    error is reported on stderr (see the module docs).  KeyboardInterrupt
    propagates only from the parsing; :func:`entry` turns it into 130."""
    from ..errors import PyebpfError, VerifierError

    if argv is None:
        argv = sys.argv[1:]
    try:
        args = _parse(argv)
    except SystemExit as exc:          # --help, or a usage error argparse printed
        return exc.code if isinstance(exc.code, int) else USAGE
    command = args.command
    if command != "bt":       # (bt: once its probes are attached)
        started()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return OK
    except VerifierError as exc:
        _traceback()
        report(command, verifier_message(exc, getattr(args, "log", None)))
        return FAILURE
    except (PyebpfError, OSError) as exc:
        _traceback()
        report(command, describe_os_error(exc) if isinstance(exc, OSError) else str(exc))
        return FAILURE
    except UnicodeDecodeError as exc:
        _traceback()
        report(command, f"the input is not UTF-8 text ({exc})")
        return FAILURE
    except RecursionError:
        _traceback()
        report(command, "input nested too deeply (Python's recursion limit was reached); "
                        "PYEBPF_DEBUG=1 shows where")
        return FAILURE
    except MemoryError:
        report(command, "out of memory")
        return FAILURE
    except Exception as exc:           # a bug: short, but enough for a report
        _traceback()
        text = str(exc)
        report(command, f"internal error: {type(exc).__name__}" + (f": {text}" if text else "")
               + ("" if debug() else " (a bug in pyebpf; PYEBPF_DEBUG=1 shows the traceback)"))
        return FAILURE


def _parse(argv: list[str]) -> Any:
    """The parsed command line: by the command's ``quick_args(argv)`` when it
    has one and that reads it, else by argparse -- the parser of the command
    named first alone, or (``--help``, ``--version``, an unknown command)
    of them all.  A usage error raises SystemExit (printed)."""
    only = argv[0] if argv and argv[0] in COMMANDS else None
    if only is not None:
        import importlib
        quick = getattr(importlib.import_module(f"pyebpf.cli.{only}"), "quick_args", None)
        args = quick(argv[1:]) if quick is not None else None
        if args is not None:
            return args
    parser = build_parser(only)
    args, extra = parser.parse_known_args(argv)
    if extra:                          # named by the sub-command, not by 'pyebpf'
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _traceback() -> None:
    if debug():
        import traceback
        traceback.print_exc()


def _silence_stdout() -> None:
    """After EPIPE on stdout: send what is left to /dev/null so that the flush
    at exit does not complain."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


def verifier_message(exc: VerifierError, log_path: str | None = None) -> str:
    """The message of a :class:`~pyebpf.errors.VerifierError` for a terminal:
    the verifier's complaint, then where its full log was written (``--log
    FILE``, else a new ``/tmp/pyebpf-verifier-*.log``), since a command-line
    user cannot read the exception's ``.log``."""
    log = exc.log or ""
    if not log.strip():
        return exc.summary + "\n  (the verifier printed no log)"
    lines = log.count("\n") + (not log.endswith("\n"))
    try:
        if log_path:
            with open(log_path, "w", encoding="utf-8") as f:
                f.write(log)
            where = log_path
        else:
            import tempfile
            fd, where = tempfile.mkstemp(prefix="pyebpf-verifier-", suffix=".log")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(log)
    except OSError as err:
        return exc.summary + f"\n  (the verifier log could not be written: {describe_os_error(err)})"
    return exc.summary + f"\n  (the full verifier log, {lines} lines, is in {where})"


def _leave(status: int) -> NoReturn:
    """Exit with ``status``, Ctrl-C no longer interrupting (see the module docs)."""
    global _armed
    _armed = False
    if _interrupted:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)


def started() -> None:
    """The command's start is over: the cyclic garbage collector, which
    :func:`entry` turned off for it, runs again -- over what is allocated
    from now on.  The start's objects (modules, classes, the program and its
    kernel objects: by the hundred thousand, and not garbage) are moved out
    of its reach (``gc.freeze``): scanning them, in the start's collections,
    the first one after it and the one at exit, costs ``pyebpf bt`` CPU time
    and frees nothing.  Does nothing when :func:`entry` did not turn the
    collector off (``main`` called from Python) or when called before."""
    global _gc_held
    if _gc_held:
        _gc_held = False
        import gc
        gc.freeze()
        gc.enable()


def entry() -> NoReturn:
    """The program: ``pyebpf`` (console script) and ``python -m pyebpf``."""
    global _armed, _gc_held
    import gc
    if gc.isenabled():        # until the command has started (see started())
        gc.disable()
        _gc_held = True
    _take(signal.SIGINT, _on_sigint)
    try:
        _armed = True
        if _interrupted:               # during the imports
            raise KeyboardInterrupt
        if sys.argv[1:2] == ["bt"]:    # (its uprobes' first wait in the kernel, begun now)
            import importlib           # (as _parse imports a sub-command's module)
            importlib.import_module("pyebpf.cli.bt").prime_early(sys.argv[2:])
        status = main()
    except KeyboardInterrupt:
        status = INTERRUPTED
    # (no call between the except and this line, so no pending SIGINT can
    # raise in between: Python runs signal handlers at calls and backward jumps)
    _armed = False
    _leave(status)


# ------------------------------------------------------------ argument types
# (argparse reports a failing type as a usage error naming the option: exit 2)

def _refused(message: str) -> Exception:
    """argparse's ArgumentTypeError (argparse imported for a refusal only:
    ``pyebpf bt``'s quick reading of its arguments does not need it)."""
    import argparse
    return argparse.ArgumentTypeError(message)


def seconds(text: str) -> float:
    """A duration in seconds: a positive, finite number (``nan``, ``inf`` and
    ``1e400`` would make a trace that never stops)."""
    import math
    try:
        value = float(text)
    except ValueError:
        raise _refused(f"expected a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise _refused(
            f"expected a positive, finite number of seconds, not {text!r}")
    if value > MAX_SECONDS:
        raise _refused(
            f"{text} seconds is more than a year: at most {MAX_SECONDS:.0f}")
    return value


#: the longest duration accepted (a year)
MAX_SECONDS = 366 * 86400.0


def positive_int(text: str) -> int:
    """A positive integer (decimal or 0x hex)."""
    if len(text) > 40:
        raise _refused(
            f"expected a positive integer, not {text[:20]}... ({len(text)} characters)")
    try:
        value = int(text, 0)
    except ValueError:
        raise _refused(f"expected a positive integer, not {text!r}") from None
    if value <= 0:
        raise _refused(f"expected a positive integer, not {text}")
    return value


def pid(text: str) -> int:
    """A process id: a positive integer that fits a pid_t."""
    value = positive_int(text)
    if value >= 1 << 31:
        raise _refused(f"{text} is not a process id (too large)")
    return value


def process_exists(pid: int) -> bool:
    """True if process ``pid`` exists (``-p PID`` is checked before attaching:
    probes filtered on a process that is not there would wait forever)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:            # it exists, owned by someone else
        return True
    return True


def command_line(text: str) -> list[str]:
    """``-c CMD``: split like a shell would (quotes, backslashes), not run by one."""
    import shlex
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        shown = text if len(text) <= 80 else text[:60] + "..."
        raise _refused(f"cannot split {shown!r} into words: {exc}") from None
    if not argv:
        raise _refused("expected a command, not an empty string")
    return argv
