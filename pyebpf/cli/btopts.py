"""``pyebpf bt``'s bpftrace options: the help text in bpftrace's layout, the
checks of option values with bpftrace 0.17's messages, and ``--info``.

bpftrace's own errors about its command line are printed as bpftrace
prints them, ``ERROR: ...`` at the start of a line (its test suite matches
them there), with pyebpf's usage-error status 2.
"""
from __future__ import annotations

import sys

from ..errors import OptionError

__all__ = ["USAGE", "OptionProblem", "check_pid", "check_format", "check_buffering",
           "command_words", "bt_error", "info_text", "PID_MAX"]

#: bpftrace's bound on ``-p`` (its fixed check, whatever the kernel's pid_max)
PID_MAX = 4194304

# (bpftrace's layout -- USAGE, OPTIONS, TROUBLESHOOTING OPTIONS, ENVIRONMENT,
# EXAMPLES -- in pyebpf's words, with pyebpf's own options)
USAGE = """\
USAGE:
    pyebpf bt [options] FILE [ARG...]
    pyebpf bt [options] - [ARG...]      (the program read from stdin)
    pyebpf bt [options] -e 'program' [ARG...]

OPTIONS:
    -B MODE        stdout buffering: 'line' (default), 'full' or 'none'
    -f FORMAT      output format: 'text' (default) or 'json'
    -o FILE        write the program's output to FILE instead of stdout
    -e 'program'   the program's text
    -h, --help     print this text and exit
    -I DIR         search DIR for #include files (repeatable)
    --include FILE #include FILE before the program (repeatable)
    -l [PATTERN]   list the probes matching PATTERN and exit
    -p PID         trace process PID only (uprobes, USDT); end when it exits
    -c 'CMD'       run CMD once attached (its pid is cpid); end when it exits;
                   CMD is split at each space, as bpftrace does (no quoting)
    --usdt-file-activation
                   accepted: USDT semaphores are counted by the kernel for every
                   process of the file (uprobe reference counters)
    --unsafe       allow the builtins that act on the system, and uprobes where
                   no instruction start is proven
    -q             quiet: no 'Attaching N probes...' line
    --info         print what this kernel supports for BPF and exit
    -k             warn when a map update or delete helper fails
    -kk            also warn on failed map lookups and memory reads
    -V, --version  print the version and exit
    --no-warnings  no warnings (the text output's -k warnings)

TROUBLESHOOTING OPTIONS:
    -v             verbose: each probe's program id and instruction count
    -d, -dd        dry run: print the generated eBPF per probe and exit
    --show-program the same as -d

PYEBPF OPTIONS:
    --flamegraph FILE.svg
                   at the end, draw every stack-keyed map as a flame graph
                   (.folded and .json also accepted; FILE-NAME.svg per map)
    --plot FILE.svg
                   at the end, draw every hist/lhist map as a bar chart
    --no-cache     compile the program, not taking it from the compiled-program
                   cache ($XDG_CACHE_HOME/pyebpf/bt), nor storing it there

ENVIRONMENT:
    __BPFTRACE_NOTIFY_PROBES_ATTACHED   when set, print that name on its own
                                        line (stderr) once the probes are attached
    PYEBPF_DEBUG=1                      print the traceback of an internal error
    PYEBPF_NO_CACHE=1                   the same as --no-cache

EXAMPLES:
pyebpf bt -e 'BEGIN { printf("hello\\n"); exit(); }'
    print a line and exit
pyebpf bt -e 'uprobe:./app:work { @calls[arg0] = count(); }' -c './app 100'
    count a function's calls by first argument while a command runs
pyebpf bt -e 't:syscalls:sys_enter_openat { printf("%s\\n", str(args->filename)); }'
    print the files opened
pyebpf bt latency.bt -p 1234
    run a script on one process's uprobes and USDT probes
pyebpf bt -e 'uretprobe:libc:malloc { @ = hist(retval); }' --show-program
    show the eBPF generated (no privilege needed)
pyebpf bt -e 'uretprobe:libc:pthread_mutex_trylock /retval/ { @f[ustack] = count(); }' \\
    -c ./app --flamegraph fails.svg
    draw where a lock was contended as a flame graph
pyebpf bt -l 'tracepoint:syscalls:*open*'
    list the matching probes

The program is compiled to eBPF in pure Python (no LLVM); the output is
bpftrace 0.17's: printf lines as events come, then at exit END's output and
every map, printed as bpftrace prints them.

exit status: 0 ok (also after Ctrl-C: the maps are printed), 1 error (a
script error, printed with the line and a caret as bpftrace prints it; a
missing probe; a verifier rejection; a picture that could not be drawn: its
data is saved as text beside it), 2 usage error, 130 Ctrl-C before attaching.
"""

#: the values of -B
BUFFERING = ("line", "full", "none")
#: the values of -f
FORMATS = ("text", "json")


class OptionProblem(OptionError):
    """An option value bpftrace refuses; its text is bpftrace's message."""


def check_pid(text: str) -> int:
    """``-p``'s value as bpftrace checks it: decimal digits (an optional
    sign), within ``[1, PID_MAX]``."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isdigit() or not digits.isascii():
        raise OptionProblem(f"pid '{text}' is not a valid decimal number")
    value = int(text)
    if not 1 <= value <= PID_MAX:
        raise OptionProblem(f"pid '{text}' out of valid pid range [1,{PID_MAX}]")
    return value


def check_format(text: str) -> str:
    """``-f``'s value (``text``, ``json``)."""
    if text not in FORMATS:
        raise OptionProblem(f'Invalid output format "{text}"\n'
                            "Valid formats: " + ", ".join(f"'{f}'" for f in FORMATS))
    return text


def check_buffering(text: str) -> str:
    """``-B``'s value (``line``, ``full``, ``none``)."""
    if text not in BUFFERING:
        raise OptionProblem("USAGE: -B must be either 'line', 'full', or 'none'.")
    return text


def command_words(text: str) -> list[str]:
    """``-c``'s command as bpftrace 0.17 runs it: split at every space, no
    quoting (``-c "echo 'A'"`` passes ``'A'`` with its quotes; two spaces
    make an empty word), and not run by a shell."""
    words = text.split(" ")
    if not words[0]:
        import argparse
        raise argparse.ArgumentTypeError(
            "expected a command (a program's name first), not an empty word"
            if text.strip() else "expected a command, not an empty string")
    return words


def bt_error(message: str) -> None:
    """Print ``ERROR: message`` on stderr, as bpftrace prints its errors."""
    print(f"ERROR: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------- --info
def info_text() -> str:
    """What ``--info`` prints: the system, pyebpf's build, and what the
    running kernel supports (each answer from a feature probe), in
    bpftrace's sections and key names."""
    import os
    import platform

    from .. import __version__
    from ..isa.helpers import helper
    from ..kernel import features
    from ..kernel.constants import MapType, ProgType

    def yes(flag: object) -> str:
        return "yes" if flag else "no"

    uname = os.uname()
    kp = ProgType.KPROBE
    lines = ["System", f"  OS: {uname.sysname} {uname.release} {uname.version}",
             f"  Arch: {uname.machine}", "",
             "Build", f"  version: pyebpf {__version__} (the bpftrace v0.17.0 language)",
             f"  Python: {platform.python_version()}", "  LLVM: none (pure Python)",
             "  unsafe uprobe: yes (--unsafe)", "  libdw (DWARF support): no", "",
             "Kernel helpers"]
    for name in ("probe_read", "probe_read_str", "probe_read_user", "probe_read_user_str",
                 "probe_read_kernel", "probe_read_kernel_str", "get_current_cgroup_id",
                 "send_signal", "override_return", "ktime_get_boot_ns", "d_path", "skb_output",
                 "ringbuf_output"):
        lines.append(f"  {name}: {yes(features.has_helper(kp, helper(name).id))}")
    lines += ["", "Kernel features",
              f"  map batch: {yes(features.has_map_batch())}",
              f"  perf links: {yes(features.has_perf_link())}",
              f"  bpf cookie: {yes(features.has_bpf_cookie())}",
              f"  uprobe_multi: {yes(features.has_uprobe_multi())}", "", "Map types"]
    for name, mt in (("hash", MapType.HASH), ("percpu hash", MapType.PERCPU_HASH),
                     ("array", MapType.ARRAY), ("percpu array", MapType.PERCPU_ARRAY),
                     ("stack_trace", MapType.STACK_TRACE),
                     ("perf_event_array", MapType.PERF_EVENT_ARRAY),
                     ("ringbuf", MapType.RINGBUF)):
        lines.append(f"  {name}: {yes(features.has_map_type(mt))}")
    lines += ["", "Probe types", f"  kprobe: {yes(features.has_kprobe_pmu())}",
              f"  uprobe: {yes(features.has_uprobe_pmu())}"]
    for name, pt in (("tracepoint", ProgType.TRACEPOINT), ("perf_event", ProgType.PERF_EVENT),
                     ("raw_tp_special", ProgType.RAW_TRACEPOINT)):
        lines.append(f"  {name}: {yes(features.has_prog_type(pt))}")
    lines.append("  kfunc: no (not attached by pyebpf)")
    return "\n".join(lines) + "\n"
