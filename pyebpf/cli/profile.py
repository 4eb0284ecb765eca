"""``pyebpf profile``: sample on-CPU stacks and write a flame graph, folded
stacks or a speedscope file."""
from __future__ import annotations

import argparse
import errno
import os
import sys
import time

from . import (FAILURE, OK, USAGE, StopSignals, _silence_stdout, command_line,
               describe_os_error, pid, positive_int, process_exists, report, seconds)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..profile.sampler import Profiler
    from ..session.live import Child

from .parser import Subparsers   # (at run time too, for documentation tools)

DESCRIPTION = """\
Sample the stacks running on the CPUs (perf cpu-clock events at HZ on every
CPU), with the Python frames of CPython 3.10-3.13 processes walked in the
kernel, and write them as a picture or as text.
"""

EPILOG = """\
output formats, from -o FILE's extension:
  .svg      an interactive flame graph (one self-contained file: hover a frame
            for its samples and percentage, click to zoom, Search to highlight)
  .folded   collapsed stacks, one line per stack: main;work;hot 123
  .json     the speedscope file format (https://www.speedscope.app)
  (no -o: the folded text on standard output)

frames: C/C++ functions (demangled), kernel functions with --kernel marked
_[k], [unknown] (MODULE) where no symbol covers an address.  Without -p/-c
every process is sampled and its name is the outermost frame.  CPython
3.10-3.13 processes show Python frames, "qualname (file:line)", in place of
the interpreter's eval-loop frames (no restart, no -X perf); other versions
show their C frames.

examples:
  pyebpf profile -c './app 1000' -o app.svg
  pyebpf profile -p 1234 -d 10 -F 999 -o app.json
  pyebpf profile -d 5 --kernel > all.folded

stops at Ctrl-C or SIGTERM, after -d seconds, or when the -c command / -p
process exits; then writes the output.  If drawing fails, the folded text is
written to FILE.folded instead and the error reported (exit status 1); if
FILE cannot be written, the folded text goes to stdout, and if stdout fails
too (a full disk), to a new $TMPDIR/pyebpf-profile-PID-*.folded that stderr
names: what was collected is never lost.
"""

#: the highest sampling frequency accepted (the kernel's own limit is
#: perf_event_max_sample_rate, 100000 by default)
MAX_HZ = 100_000


def register(subparsers: Subparsers) -> None:
    """Add the ``profile`` sub-command to ``subparsers``."""
    p = subparsers.add_parser("profile", help="sample CPU stacks: flame graph (SVG), folded, "
                              "speedscope", description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    t = p.add_mutually_exclusive_group()
    t.add_argument("-p", "--pid", type=pid, metavar="PID",
                   help="sample only this process (its threads); stop when it exits")
    t.add_argument("-c", "--command", dest="cmd", metavar="CMD", type=command_line,
                   help="run CMD and sample it until it exits")
    p.add_argument("-F", "--frequency", type=positive_int, default=99, metavar="HZ",
                   help="samples per second on each CPU (default 99)")
    p.add_argument("-d", "--duration", type=seconds, metavar="S", help="stop after S seconds")
    p.add_argument("--kernel", action="store_true",
                   help="include kernel stacks (symbolized from /proc/kallsyms)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write FILE in the format its extension names (see below)")
    p.add_argument("--title", help="the flame graph's title (default: the command or pid)")
    p.add_argument("-q", "--quiet", action="store_true", help="no status line on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``pyebpf profile``: sample, then write the output; the exit status."""
    from ..draw.output import format_of
    from ..errors import OptionError
    if args.frequency > MAX_HZ:
        print(f"pyebpf profile: -F {args.frequency}: at most {MAX_HZ} Hz", file=sys.stderr)
        return USAGE
    try:
        fmt = format_of(args.output) if args.output else "folded"
    except OptionError as exc:
        report("profile", str(exc))
        return USAGE
    if args.pid is not None and not process_exists(args.pid):
        report("profile", f"no process {args.pid}")
        return FAILURE
    title = args.title or (" ".join(args.cmd) if args.cmd else
                           f"pid {args.pid}" if args.pid else "all processes")
    stacks, seconds_run, lost = _sample(args)
    return _write(args, fmt, stacks, title, seconds_run, lost)


def _sample(args: argparse.Namespace) -> tuple[dict[tuple[str, ...], int], float, int]:
    """Sample until a stop condition; the symbolized stacks, the seconds
    sampled and the samples lost (the ring buffer was full)."""
    import shutil

    from ..profile.sampler import Profiler
    from ..session import live
    from .runner import RunGuard
    stops = StopSignals()
    with RunGuard(stops) as guard:
        child = guard.child = live.Child(args.cmd) if args.cmd else None
        target = child.pid if child else args.pid
        prof = guard.resource = Profiler(args.frequency, pid=target, kernel=args.kernel)
        if args.cmd and shutil.which(args.cmd[0]):
            prof.symbolizer.add_file(os.path.realpath(shutil.which(args.cmd[0]) or ""))
        stops.hold()                  # from the first attach on, the output is written
        prof.attach()
        t0 = time.monotonic()

        def sample() -> None:
            if not args.quiet:
                print(f"Sampling at {args.frequency} Hz "
                      + (f"in process {target} (its threads only). " if target else "on every CPU. ")
                      + ("Running the command." if child else "Hit Ctrl-C to end."),
                      file=sys.stderr, flush=True)
            _wait(prof, child, args.pid, args.duration)

        stops.run(sample, child)      # (a command that cannot run is the only message)
        elapsed = time.monotonic() - t0
        prof.detach()
        if child is not None and not child.poll():
            child.kill()
        stacks = prof.stacks()
        if not args.quiet:
            for note in prof.python_notes():
                print(note, file=sys.stderr)
            walks = prof.python_status()
            if set(walks) - {"ok"}:
                print("Python frame walks: " + ", ".join(f"{n} {why}" for why, n in
                                                        sorted(walks.items())),
                      file=sys.stderr)
        return stacks, elapsed, prof.lost


def _wait(prof: Profiler, child: Child | None, pid: int | None,
          duration: float | None) -> None:
    """Until the duration is over or the process exits (KeyboardInterrupt on
    a stop signal); the process's mapped files are snapshotted now and then
    (for frames without a build id)."""
    import select
    target = child.pid if child is not None else pid
    watch_fd = child.pidfd if child is not None else _pidfd(pid)
    deadline = time.monotonic() + duration if duration is not None else None
    next_snapshot = time.monotonic() + 0.05
    try:
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if now >= next_snapshot:
                if target is not None:
                    prof.remember(target)
                else:
                    prof.remember_seen()
                next_snapshot = now + 1.0
            prof.drain()              # (the samples travel in a ring buffer)
            waits = [max(0.0, next_snapshot - now), 0.05]
            if deadline is not None:
                waits.append(deadline - now)
            ready = select.select([watch_fd] if watch_fd is not None else [], [], [],
                                  max(0.0, min(waits)))[0]
            if child is not None and child.poll():
                return
            if ready and child is None:
                return
            if child is None and pid is not None and watch_fd is None and \
                    not process_exists(pid):
                return
    finally:
        if child is None and watch_fd is not None:
            os.close(watch_fd)


def _pidfd(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _write(args: argparse.Namespace, fmt: str, stacks: dict[tuple[str, ...], int],
           title: str, elapsed: float, lost: int = 0) -> int:
    """Write the output (stdout without -o); on a failure the folded text
    still lands somewhere (see the epilog)."""
    from ..draw.output import ProfileWriteError, write_profile
    total = sum(stacks.values())
    if not args.output:
        if not _to_stdout(stacks, ""):
            return FAILURE
    else:
        subtitle = f"{total} samples at {args.frequency} Hz over {elapsed:.1f} s"
        try:
            write_profile(stacks, args.output, title, subtitle, fmt)
        except ProfileWriteError as exc:
            if exc.saved is not None:
                report("profile", str(exc))
            else:
                _to_stdout(stacks, str(exc))
            return FAILURE
        except OSError as exc:
            _to_stdout(stacks, describe_os_error(exc))
            return FAILURE
    if not args.quiet:
        where = f" to {args.output}" if args.output else ""
        print(f"{total} samples, {len(stacks)} distinct stacks{where}.", file=sys.stderr)
        if lost:
            print(f"{lost} more samples were lost: the ring buffer was full.", file=sys.stderr)
    return OK


def _to_stdout(stacks: dict[tuple[str, ...], int], failed: str) -> bool:
    """The folded text on standard output, after reporting ``failed`` (why
    the file asked for was not written, if it was not); when standard output
    fails too (a full disk, closed), the text goes to a new file in $TMPDIR
    and stderr says where: the stacks are never lost.  True when stdout took it."""
    from ..draw.folded import folded_text
    from ..draw.output import write_fallback
    text = folded_text(stacks)
    if failed:
        report("profile", f"{failed}; the folded stacks follow on stdout")
    try:
        if sys.stdout is None:
            raise OSError(errno.EBADF, "closed")
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        raise                         # (the reader left: as for any command, not an error)
    except (OSError, ValueError) as exc:    # (ValueError: a closed sys.stdout)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _silence_stdout()           # (what is still buffered: the flush at exit must not fail)
    try:
        saved = write_fallback(text)
    except OSError as exc:
        report("profile", f"standard output: {why}; the stacks could not be saved "
                          f"({describe_os_error(exc)})")
    else:
        report("profile", f"standard output: {why}; the folded stacks were written to {saved}")
    return False
