"""Limits and validation of the tracing toolkit: the lhist bucket cap, buffer
sizes, showing programs without privilege (no map is created), expression and
filter errors, asm/ header fields -- each checked before anything reaches the
kernel, each failing with a documented error (PyebpfError)."""
from __future__ import annotations

import os
import subprocess

import pytest
import unprivileged
from hypothesis import given, strategies as st

from budget import fuzz_settings
from pyebpf.errors import OptionError, ProgramError, PyebpfError, SizeError
from pyebpf.lang.aggregations import LHIST_MAX_BUCKETS, Avg, Count, Histogram, Sum, linear_buckets
from pyebpf.maps import MapSpec
from pyebpf.session.asmfile import AsmFileError, parse_asm_file, read_asm_file
from pyebpf.trace import Trace

from .conftest import ROOT

BASH = "uprobe:/bin/bash:readline"
PROGRAM = f"# pyebpf: program p attach={BASH}\n    r0 = 0\n    exit\n"


# ---------------------------------------------------------------- lhist cap
def test_linear_bucket_count_and_cap():
    assert linear_buckets(0, 100, 10) == 12
    assert linear_buckets(0, LHIST_MAX_BUCKETS, 1) == LHIST_MAX_BUCKETS + 2
    assert linear_buckets(-(1 << 63), (1 << 63) - 1, 1 << 62) == 6
    with pytest.raises(ProgramError, match=f"at most {LHIST_MAX_BUCKETS}"):
        linear_buckets(0, LHIST_MAX_BUCKETS + 1, 1)
    for bad in [(0, 0, 0), (5, 1, 1), (0, 10, 0), (0, 10, -1), (0, 1 << 64, 1), (0, 1.5, 1)]:
        with pytest.raises(ProgramError):
            linear_buckets(*bad)


def test_huge_lhist_is_refused_at_once():
    """lhist(arg0, 0, 100000000, 1) built a per-CPU array of 100M entries
    (68 s in the kernel); above 2**32 buckets an OverflowError."""
    for hi in (100_000_000, 1 << 40):
        with pytest.raises(ProgramError, match="at most 1000 are allowed"):
            Trace(BASH).lhist("arg0", 0, hi, 1)
    with pytest.raises(ProgramError, match="at most 1000"):
        Histogram("h", linear=(0, 100_000_000, 1), create=False)


def test_lhist_with_64_bit_bounds_is_built():
    t = Trace(BASH).lhist("arg0", 0, 10_000_000_000, 100_000_000)
    text = t.show()
    assert "lhist(arg0, 0, 10000000000, 100000000)" in t.text() and "10000000000 ll" in text


# ---------------------------------------------------------------- showing without maps
def test_show_creates_no_kernel_object():
    """show() compiles and generates: no map, no program, no fd is made."""
    before = sorted(os.listdir("/proc/self/fd"))
    t = (Trace(BASH, ring=True).lhist("arg0", 0, 100, 1, by="comm").count(by="ustack")
         .hist("latency").print("%d %s", "pid", "comm"))
    assert "lhist($arg0, 0, 100, 1)" in t.show()
    assert sorted(os.listdir("/proc/self/fd")) == before
    t.close()


def test_show_then_start_counts(tmp_path):
    """After show(), start() creates the maps and the programs use them."""
    t = (Trace("tracepoint:syscalls:sys_enter_getppid", pid=os.getpid()).count()
         .lhist("pid", 0, 10_000_000_000, 100_000_000))       # a 64-bit bound, too
    assert "call" in t.show()
    with t.start() as session:
        for _ in range(3):
            os.getppid()
        assert session.results() == {"@count": 3, "@lhist": {1: 3}}


def test_start_for_a_pid_after_show_traces_that_pid():
    """A trace shown (built without a pid), then started for one: built
    again for it (it ran for every process)."""
    t = Trace("tracepoint:syscalls:sys_enter_getppid").count()
    assert "pid ==" not in t.show()
    with t.start(os.getpid()) as session:
        assert f"/pid == {os.getpid()}/" in t.text()
        for _ in range(3):
            os.getppid()
        assert session.value() == 3


def _unprivileged(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([*unprivileged.python_argv(), *argv], capture_output=True,
                          text=True, timeout=120, env=env, cwd="/")


def test_show_program_works_without_cap_bpf():
    """--show-program needs nothing from the kernel (it created every map)."""
    for extra in ([], ["--ringbuf"]):
        proc = _unprivileged("-m", "pyebpf", "trace", BASH, "--lhist", "arg0", "0", "100", "1",
                             "--count", "ustack", "--hist", "latency", "--print", "pid", "comm",
                             "--show-program", *extra)
        assert proc.returncode == 0, proc.stderr
        # (--hist latency: the actions run at the return, on the saved $arg0)
        assert "lhist($arg0, 0, 100, 1)" in proc.stdout and "exit" in proc.stdout
    proc = _unprivileged("-c", "from pyebpf.trace import Trace; "
                               f"print(Trace({BASH!r}).stats('arg0', by='comm').show())")
    assert proc.returncode == 0, proc.stderr
    assert "stats(arg0)" in proc.stdout


def test_huge_lhist_fails_before_any_kernel_call():
    """Unprivileged, any map creation would fail with EPERM: the cap's
    message shows the check came first."""
    proc = _unprivileged("-m", "pyebpf", "trace", BASH, "--lhist", "arg0", "0", "100000000",
                         "1", "--show-program")
    assert proc.returncode == 1
    assert "at most 1000 are allowed" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- buffer sizes
@pytest.mark.parametrize("ring", [False, True])
@pytest.mark.parametrize("size", [0, -5, 1 << 40, (1 << 31) + 1])
def test_bad_buffer_size_is_refused_up_front(ring, size):
    with pytest.raises(SizeError, match="2 GiB"):
        Trace(BASH, ring=ring, buffer_size=size)


def test_buffer_size_cli_error_is_clean():
    from .conftest import cli
    proc = cli("trace", BASH, "--print", "pid", "--buffer-size", str(1 << 40), "--show-program")
    assert proc.returncode == 1 and "2 GiB" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- expressions
@pytest.mark.parametrize("text, words", [
    ("09", "trailing non-numeric"),             # (the language's words: 0... is octal)
    ("arg0 / 09", "trailing non-numeric"),
    ("9" * 5000, "too long"),
    ("0x" + "f" * 5000, "out of range"),
    ("0x10000000000000000", "out of range"),
    ("(" * 1200 + "arg0" + ")" * 1200, "nest more than"),
    ("str(" * 300 + "arg0" + ")" * 300, "nest more than"),
    ("arg" + "9" * 5000, "too long"),
])
def test_expression_errors(text, words):
    with pytest.raises(PyebpfError, match=words):
        Trace(BASH).count(by=text).build()


def test_nesting_up_to_the_limit_is_fine():
    from pyebpf.lang.flags import MAX_DEPTH
    t = Trace(BASH).count(by="(" * MAX_DEPTH + "arg0" + ")" * MAX_DEPTH)
    assert "@[arg0] = count();" in t.text()


def test_octal_literals_read_as_the_language_reads_them():
    """The language's parser (bpftrace's rules) reads ``010`` as octal 8."""
    t = Trace(BASH).count(by="str(arg0, 010), arg0 & 010")
    assert "@[str(arg0, 8), arg0 & 8] = count();" in t.text()


@pytest.mark.parametrize("text, words", [
    ('comm == "ba\\x"', "invalid escape"),
    ('comm == "\\u1234"', "invalid escape"),
    ('comm == "ab\\', "unterminated string"),
    ("arg0 > 09", "trailing non-numeric"),
])
def test_filter_errors(text, words):
    with pytest.raises(PyebpfError, match=words):
        Trace(BASH).filter(text).count().build()


def test_filter_literal_escapes():
    t = Trace(BASH).filter('comm == "b\\x41\\tsh\\""').filter('comm == "é"').count()
    assert '/comm == "bA\\tsh\\"" && comm == "é"/' in t.text()


_ATOMS = ["arg0", "arg1", "arg12", "retval", "latency", "pid", "tid", "uid", "gid", "cpu",
          "nsecs", "elapsed", "comm", "ustack", "probe", "func", "args.x", "args->y", "0",
          "42", "0x2a", "str(arg0)", "str(arg1, 8)", "09", "0x", "arg", "str()", "nope"]
_OPS = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "==", "!=", "<", "<=", ">", ">=",
        ",", "(", ")", ".", "->", '"x"', '"\\q"']


@st.composite
def near_valid(draw):
    """Token soup close to the expression grammar."""
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        parts.append(draw(st.sampled_from(_ATOMS + _OPS)))
    depth = draw(st.integers(0, 3))
    return "(" * depth + " ".join(parts) + ")" * draw(st.integers(0, 3))


def _documented(fn, *args):
    try:
        fn(*args)
    except PyebpfError:
        pass


@fuzz_settings(300)
@given(st.one_of(st.text(max_size=80), near_valid()))
def test_expressions_and_filters_give_only_documented_errors(text):
    _documented(lambda: Trace(BASH).count(by=text).text())
    _documented(lambda: Trace(BASH).filter(text).count().text())


@fuzz_settings(100)
@given(near_valid(), st.sampled_from(["count", "sum", "hist", "filter", "print"]))
def test_trace_builder_gives_only_documented_errors(text, how):
    """The Trace builder (its program compiled and generated) too."""
    def build():
        t = Trace(BASH)
        if how == "count":
            t.count(by=text)
        elif how == "filter":
            t.filter(text).count()
        elif how == "print":
            t.print(None, text)
        else:
            getattr(t, how)(text)
        t.show()
    _documented(build)


# ---------------------------------------------------------------- asm/ headers
@pytest.mark.parametrize("header, words", [
    ("map h percpu_array value=u64 entries=10 show=lhist:0:0:0", "min < max"),
    ("map h percpu_array value=u64 show=lhist:0:100000000:1", "at most 1000"),
    ("map h hash entries=99999999999999", "max_entries must be 1..4294967295"),
    ("map h hash entries=0", "max_entries"),
    ("map h hash entries=09", "not an integer"),
    ("map h hash entries=" + "9" * 5000, "too long"),
    ("map h hash type=foo", "unexpected 'type=foo'"),
    ("map h hash key=u128", "unknown type 'u128'"),
    ("map h hash value=char[0]", "unknown type"),
    ("map h ringbuf entries=1000", "power of two"),
    ("map h ringbuf entries=4294967296", "power of two"),
    ("map h ringbuf key=u32", "takes no key"),
    ("map h percpu_array value=char[40000]", "unknown type|32768"),
    ("map h array key=u64", "u32 index"),
    ("map 1h hash", "map name"),
    ("map waytoolongmapname_x hash", "map name"),
    ("map e perf_event_array show=count", "holds no values"),
    ("map e perf_event_array entries=4", "one slot per CPU"),
    ("map h hash show=lhist:1:2", "one of none"),
    ("map e perf_event_array\n# pyebpf: output e fields=a:u32 format=\"%d %d\"",
     "2 conversion"),
    ("map e perf_event_array\n# pyebpf: output e fields=", "needs fields"),
    ("map e perf_event_array\n# pyebpf: output e fields=a:u32,a:u64", "twice"),
    ("map e perf_event_array\n# pyebpf: output e fields=1a:u32", "NAME:TYPE"),
    ("map e perf_event_array\n# pyebpf: output e fields=a:u32\n"
     "# pyebpf: output e fields=b:u32", "second output"),
    ("map h hash\n# pyebpf: map h array", "second map"),
    ("program q attach=x type=nonsense", "unknown program type"),
])
def test_header_fields_are_checked_when_read(header, words):
    text = "# pyebpf: " + header + "\n" + PROGRAM
    with pytest.raises(AsmFileError, match=words) as info:
        parse_asm_file(text, "f.s")
    assert str(info.value).startswith("f.s:") and info.value.line >= 1


def test_lhist_header_ranges_come_from_one_place():
    af = parse_asm_file("# pyebpf: map h percpu_array value=u64 entries=12 show=lhist:0:100:10\n"
                        + PROGRAM, "f.s")
    assert af.maps["h"].linear == (0, 100, 10)


def test_asm_files_of_the_repository_still_read():
    for path in sorted((ROOT / "asm").glob("*.s")):
        assert read_asm_file(str(path)).programs


_HEADERS = [
    "map calls hash key=u64 value=u64 entries=10240 show=count",
    "map usecs percpu_array value=u64 entries=66 show=hist",
    "map h percpu_array value=u64 entries=12 show=lhist:0:100:10",
    "map events perf_event_array",
    "map rb ringbuf entries=65536",
    "output events fields=pid:u32,comm:char[16] format=\"%d %s\"",
    "param BINARY=/bin/bash the binary",
    "description counts calls",
    f"program p attach={BASH} type=kprobe",
]
_NOISE = st.sampled_from(list(" =:,\"'\\[]-0x9$#") + ["entries=", "show=lhist:", "char[",
                                                       "99999999999999999999", "0" * 30, "é"])


@st.composite
def mutated_headers(draw):
    lines = draw(st.lists(st.sampled_from(_HEADERS), min_size=1, max_size=5))
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, len(lines) - 1))
        line = lines[k]
        pos = draw(st.integers(0, len(line)))
        if draw(st.booleans()):
            line = line[:pos] + draw(_NOISE) + line[pos:]
        else:
            line = line[:pos] + line[pos + draw(st.integers(1, 5)):]
        lines[k] = line
    return "".join(f"# pyebpf: {line}\n" for line in lines) + PROGRAM


@fuzz_settings(200)
@given(mutated_headers())
def test_mutated_headers_give_only_file_line_errors(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("asm") / "f.s"
    path.write_text(text, encoding="utf-8")
    try:
        af = read_asm_file(str(path))
    except AsmFileError as exc:
        assert exc.filename == str(path)
        return
    for d in af.maps.values():        # what was accepted can be described
        d.spec()


# ---------------------------------------------------------------- typed API misuse
def test_an_aggregation_without_a_value_is_refused_when_added():
    """sum/min/max/avg/stats/hist/lhist need a value: a clear OptionError at
    the call (it was a TypeError deep in the program generation)."""
    for kind in ("sum", "min", "max", "avg", "stats", "hist"):
        with pytest.raises(OptionError, match=rf"{kind}\(\) needs a value"):
            getattr(Trace(BASH), kind)(None)
    with pytest.raises(OptionError, match=r"lhist\(\) needs a value"):
        Trace(BASH).lhist(None, 0, 10, 1)
    assert Trace(BASH).count().aggregates[0].value is None       # count takes none


@pytest.mark.parametrize("make", [
    lambda: Count("c", create=False),
    lambda: Sum("s", keyed=True, create=False),
    lambda: Histogram("h", keyed=True, create=False),
    lambda: Avg("a", create=False),
])
def test_reading_a_described_aggregation_is_a_clear_error(make):
    """create=False only describes the map: read()/clear() before open() say so
    (they were an AttributeError/TypeError on the MapSpec)."""
    agg = make()
    assert isinstance(agg.map, MapSpec)
    with pytest.raises(ProgramError, match="not created yet"):
        agg.read()
    with pytest.raises(ProgramError, match="not created yet"):
        agg.clear()
