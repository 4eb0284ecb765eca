"""pyebpf.lang.output against bpftrace 0.17: programs that set maps to known
values in ``BEGIN { ...; exit(); }`` (no probe to attach) are run by the
installed bpftrace, and the formatter, given the same entries, must print
exactly the same text (and the same ``-f json`` lines). Then C's printf as
the oracle for the integer conversions."""
from __future__ import annotations

import ctypes
import json
import time

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.lang import output as out
from pyebpf.lang import output_maps as maps
from pyebpf.lang.aggregations import log2_bucket
from pyebpf.lang.types import Type, int_type, string_type

from .harness import run_bpftrace

I64, U64, I32, I8 = int_type(8, True), int_type(8, False), int_type(4, True), int_type(1, True)
S = string_type(64)
COUNT, SUM, MIN, MAX = Type("count"), Type("sum", 8, True), Type("min", 8, True), \
    Type("max", 8, True)
AVG, STATS, HIST = Type("avg", 8, True), Type("stats", 8, True), Type("hist")


def lhist(lo: int, hi: int, step: int) -> Type:
    return Type("lhist", lhist=(lo, hi, step))


def hist_of(*values: int) -> dict[int, int]:
    b: dict[int, int] = {}
    for v in values:
        b[log2_bucket(v)] = b.get(log2_bucket(v), 0) + 1
    return b


def lhist_of(lo: int, hi: int, step: int, *values: int) -> dict[int, int]:
    b: dict[int, int] = {}
    for v in values:
        i = maps.lhist_bucket(v, lo, hi, step)
        b[i] = b.get(i, 0) + 1
    return b


def stats_of(*values: int) -> tuple[int, int]:
    return (len(values), sum(values))


def key2(a: Type, b: Type) -> Type:
    return Type("tuple", elems=(a, b))


# every kind of map, set in BEGIN, printed at exit -- and the same maps as the formatter sees them
EXIT_SCRIPT = r"""BEGIN {
  @c[1, "x"] = count(); @c[2, "abc"] = count(); @c[2, "abc"] = count();
  @h = hist(5); @h = hist(0); @h = hist(-3); @h = hist(1); @h = hist(1024); @h = hist(1500);
  @l = lhist(3, 0, 10, 2); @l = lhist(-1, 0, 10, 2); @l = lhist(12, 0, 10, 2); @l = lhist(3, 0, 10, 2);
  @s = stats(-4); @s = stats(10); @a = avg(7); @a = avg(-2);
  @mn = min(-5); @mx = max(3); @sm = sum(-9);
  @e[1] = count(); delete(@e[1]);
  @str["hello"] = 5; @str["a"] = -7;
  @tup = (1, "a", -3); @nest = (1, (2, "x"), "c");
  @i8 = (int8)-1; @u32 = (uint32)-1; @u64 = (uint64)-1;
  @sv[3] = "c"; @sv[1] = "zz"; @sv[2] = "a";
  @ak[1] = avg(10); @ak[2] = avg(-20); @ak[2] = avg(4);
  @sk["p"] = stats(3); @sk["q"] = stats(1);
  @hk[1] = hist(1); @hk[1] = hist(1); @hk[2] = hist(1000000);
  @lk["z"] = lhist(55, 0, 100, 10); @lk["y"] = lhist(5, 0, 100, 10); @lk["y"] = lhist(5, 0, 100, 10);
  @neg[-1] = -5; @neg[5] = 2; @neg[-7] = 9;
  @uk[(uint64)-1] = 1; @uk2[(uint8)200, (uint64)-3] = (uint64)-3; @uk3[(uint32)-1] = 2;
  @part = lhist(9, 0, 10, 3); @part = lhist(1, 0, 10, 3); @part = lhist(6, 0, 10, 3);
  @mk[1] = min(-1); @mk[2] = min(-5); @xk[1] = max(4); @xk[2] = max(9);
  @ss["b", -1] = sum(-3); @ss["a", 2] = sum(5);
  exit();
}"""

EXIT_MAPS = [
    ("@c", key2(I64, S), COUNT, {(1, "x"): 1, (2, "abc"): 2}),
    ("@h", None, HIST, {None: hist_of(5, 0, -3, 1, 1024, 1500)}),
    ("@l", None, lhist(0, 10, 2), {None: lhist_of(0, 10, 2, 3, -1, 12, 3)}),
    ("@s", None, STATS, {None: stats_of(-4, 10)}),
    ("@a", None, AVG, {None: stats_of(7, -2)}),
    ("@mn", None, MIN, {None: -5}),
    ("@mx", None, MAX, {None: 3}),
    ("@sm", None, SUM, {None: -9}),
    ("@e", I64, COUNT, {}),
    ("@str", S, I64, {"hello": 5, "a": -7}),
    ("@tup", None, Type("tuple", elems=(I64, S, I64)), {None: (1, "a", -3)}),
    ("@nest", None, Type("tuple", elems=(I64, Type("tuple", elems=(I64, S)), S)),
     {None: (1, (2, "x"), "c")}),
    ("@i8", None, I8, {None: -1}),
    ("@u32", None, int_type(4, False), {None: 4294967295}),
    ("@u64", None, U64, {None: 2 ** 64 - 1}),
    ("@sv", I64, S, {3: "c", 1: "zz", 2: "a"}),
    ("@ak", I64, AVG, {1: stats_of(10), 2: stats_of(-20, 4)}),
    ("@sk", S, STATS, {"p": stats_of(3), "q": stats_of(1)}),
    ("@hk", I64, HIST, {1: hist_of(1, 1), 2: hist_of(1000000)}),
    ("@lk", S, lhist(0, 100, 10), {"z": lhist_of(0, 100, 10, 55),
                                   "y": lhist_of(0, 100, 10, 5, 5)}),
    ("@neg", I64, I64, {-1: -5, 5: 2, -7: 9}),
    ("@uk", U64, I64, {2 ** 64 - 1: 1}),
    ("@uk2", key2(int_type(1, False), U64), U64, {(200, 2 ** 64 - 3): 2 ** 64 - 3}),
    ("@uk3", int_type(4, False), I64, {2 ** 32 - 1: 2}),
    ("@part", None, lhist(0, 10, 3), {None: lhist_of(0, 10, 3, 9, 1, 6)}),
    ("@mk", I64, MIN, {1: -1, 2: -5}),
    ("@xk", I64, MAX, {1: 4, 2: 9}),
    ("@ss", key2(S, I64), SUM, {("b", -1): -3, ("a", 2): 5}),
]


def test_maps_at_exit_like_bpftrace():
    theirs = run_bpftrace(EXIT_SCRIPT)
    assert maps.format_exit(EXIT_MAPS) == theirs


def test_maps_as_json_like_bpftrace():
    theirs = run_bpftrace(EXIT_SCRIPT, "-f", "json").split("\n")
    assert theirs[0] == '{"type": "attached_probes", "data": {"probes": 1}}'
    ours = [line for m in sorted(EXIT_MAPS, key=lambda m: m[0])
            for line in [maps.json_map(*m)] if line]
    # bpftrace: the attached_probes line, two newlines at exit, then the maps
    assert theirs[1:3] == ["", ""]
    assert ours == [ln for ln in theirs[3:] if ln]
    for line in ours:
        json.loads(line)


PRINT_SCRIPT = r"""BEGIN {
  @c[1] = count(); @c[2] = count(); @c[2] = count();
  @c[3] = count(); @c[3] = count(); @c[3] = count(); @c[3] = count();
  print(@c, 2); print(@c, 0, 2); print(@c, 1, 3);
  @h[1] = hist(1); @h[2] = hist(2); @h[2] = hist(2); @h[2] = hist(8);
  print(@h, 1); print(@h, 0, 2);
  @a[1] = avg(10); @a[2] = avg(21); print(@a, 1, 3); print(@a, 0, 2);
  @st[1] = stats(10); print(@st, 0, 3);
  @x = 7; print(@x); print(@x, 0, 2);
  print((1, "b")); print(5); print("s"); print((int8)-3); print((1, (2, "x"), "c"));
  clear(@c); clear(@h); clear(@a); clear(@st);
  exit();
}"""


def test_print_top_div_and_values_like_bpftrace():
    theirs = run_bpftrace(PRINT_SCRIPT)
    c = {1: 1, 2: 2, 3: 4}
    h = {1: hist_of(1), 2: hist_of(2, 2, 8)}
    a = {1: stats_of(10), 2: stats_of(21)}
    st_ = {1: stats_of(10)}
    ours = "".join([
        maps.format_map("@c", I64, COUNT, c, top=2),
        maps.format_map("@c", I64, COUNT, c, div=2),
        maps.format_map("@c", I64, COUNT, c, top=1, div=3),
        maps.format_map("@h", I64, HIST, h, top=1),
        maps.format_map("@h", I64, HIST, h, div=2),
        maps.format_map("@a", I64, AVG, a, top=1, div=3),
        maps.format_map("@a", I64, AVG, a, div=2),
        maps.format_map("@st", I64, STATS, st_, div=3),
        maps.format_map("@x", None, I64, {None: 7}),
        maps.format_map("@x", None, I64, {None: 7}, div=2),
        out.format_value(Type("tuple", elems=(I64, S)), (1, "b")) + "\n",
        out.format_value(I64, 5) + "\n",
        out.format_value(S, "s") + "\n",
        out.format_value(I8, -3) + "\n",
        out.format_value(Type("tuple", elems=(I64, Type("tuple", elems=(I64, S)), S)),
                         (1, (2, "x"), "c")) + "\n",
        maps.format_exit([("@c", I64, COUNT, {}), ("@h", I64, HIST, {}),
                         ("@a", I64, AVG, {}), ("@st", I64, STATS, {}),
                         ("@x", None, I64, {None: 7})]),
    ])
    assert ours == theirs


def test_print_json_like_bpftrace():
    theirs = run_bpftrace(r"""BEGIN { @c[1] = count(); @c[2] = count(); @c[2] = count();
        print(@c, 1); print(@c, 0, 2); print((1, (2, "x"), "c")); print(5); print("s");
        printf("x %d %s\n", 5, "q\"uote\\"); time("%Y\n"); clear(@c); exit(); }""",
                          "-f", "json").split("\n")
    c = {1: 1, 2: 2}
    year = time.strftime("%Y")
    assert theirs[1:] == [
        maps.json_map("@c", I64, COUNT, c, top=1),
        maps.json_map("@c", I64, COUNT, c, div=2),
        out.json_value(Type("tuple", elems=(I64, Type("tuple", elems=(I64, S)), S)),
                       (1, (2, "x"), "c")),
        out.json_value(I64, 5),
        out.json_value(S, "s"),
        out.json_printf(out.format_printf("x %d %s\n", [(I64, 5), (S, 'q"uote\\')])),
        out.json_time(out.format_time(f"{year}\n")),
        "", "", ""]


PRINTF_SCRIPT = r"""BEGIN {
  printf("%d|%u|%x|%X|%o|%ld|%lu|%lx|%hd|%hu|%hhd|%hhu\n", 4294967596, 4294967596, -2, -2, -2, -2, -2, -2, 70000, -2, 300, -2);
  printf("%hhx|%zu|%jx|%lld|%llu|%c|%5d|%-5d|%05d|%.3d|%08.3d|%-05d\n", -2, -2, -2, -2, -2, 65, 42, 42, -42, 7, -1, 3);
  printf("[%5s|%-5s|%.2s|%%|%p|%5p|%-20p|%s|%10.3s]\n", "ab", "ab", "abcdef", 0, 0, 4096, "", "abcdef");
  printf("%r|%s|%s|%d|%s|%s\n", buf("ab\x01\xffc\"\\", 7), ntop(0x0100007f), probe, (int8)-3, ntop(pton("::1")), username);
  exit();
}"""


def test_printf_like_bpftrace():
    import pwd
    import os
    theirs = run_bpftrace(PRINTF_SCRIPT)
    lines = [
        out.format_printf("%d|%u|%x|%X|%o|%ld|%lu|%lx|%hd|%hu|%hhd|%hhu\n",
                          [(I64, v) for v in (4294967596, 4294967596, -2, -2, -2, -2, -2, -2,
                                              70000, -2, 300, -2)]),
        out.format_printf("%hhx|%zu|%jx|%lld|%llu|%c|%5d|%-5d|%05d|%.3d|%08.3d|%-05d\n",
                          [(I64, v) for v in (-2, -2, -2, -2, -2, 65, 42, 42, -42, 7, -1, 3)]),
        out.format_printf("[%5s|%-5s|%.2s|%%|%p|%5p|%-20p|%s|%10.3s]\n",
                          [(S, "ab"), (S, "ab"), (S, "abcdef"), (I64, 0), (I64, 0),
                           (I64, 4096), (S, ""), (S, "abcdef")]),
        out.format_printf("%r|%s|%s|%d|%s|%s\n",
                          [(Type("buffer", 7), b'ab\x01\xffc"\\'),
                           (Type("inet"), bytes([127, 0, 0, 1])), (Type("probe"), "BEGIN"),
                           (I8, -3), (Type("inet"), bytes(15) + b"\x01"),
                           (Type("username"), os.getuid())]),
    ]
    assert pwd.getpwuid(os.getuid()).pw_name in lines[-1]
    assert "".join(lines) + "\n\n" == theirs


def test_buffers_inet_probe_and_strftime_keys_like_bpftrace():
    theirs = run_bpftrace(r"""BEGIN { @b = buf("a\x02", 2); @bk[buf("k\x00", 2)] = 1;
        @n[ntop(0x0100007f)] = 2; @p[probe] = 3; printf("%s\n", strftime("%Y-%m-%d %H:%M", 0));
        exit(); }""")
    ours = out.format_strftime("%Y-%m-%d %H:%M", 0) + "\n" + maps.format_exit([
        ("@b", None, Type("buffer", 2), {None: b"a\x02"}),
        ("@bk", Type("buffer", 2), I64, {b"k\x00": 1}),
        ("@n", Type("inet"), I64, {bytes([127, 0, 0, 1]): 2}),
        ("@p", Type("probe"), I64, {"BEGIN": 3}),
    ])
    assert ours == theirs


# ------------------------------------------------------------------ pure
def test_lhist_buckets_as_bpftrace_counts_them():
    # lhist(v, 0, 10, 3): [0, 3) [3, 6) [6, 9), and 9 goes with the rest: [10, ...)
    assert [maps.lhist_bucket(v, 0, 10, 3) for v in (-1, 0, 2, 3, 8, 9, 10, 99)] == \
        [0, 1, 1, 2, 3, 4, 4, 4]
    assert maps.lhist_range(4, 0, 10, 3) == (10, None)
    assert maps.lhist_range(0, 0, 10, 3) == (None, 0)


def test_decode_signed_sizes_strings_and_tuples():
    assert out.decode(I8, b"\xfd") == -3
    assert out.decode(int_type(2, True), b"\xfe\xff") == -2
    assert out.decode(I32, (-29).to_bytes(4, "little", signed=True)) == -29
    assert out.decode(int_type(4, False), b"\xff\xff\xff\xff") == 4294967295
    assert out.decode(U64, b"\xff" * 8) == 2 ** 64 - 1
    assert out.decode(string_type(8), b"abc\0zzzz") == "abc"
    assert out.decode(string_type(4), b"abcdefgh") == "abcd"
    # a tuple (int8, int64, string[3], int32): C layout, padding after int8 and the string
    t = Type("tuple", elems=(I8, I64, string_type(3), I32))
    assert out.tuple_offsets(t) == [0, 8, 16, 20]
    raw = (b"\xff" + b"\0" * 7 + (5).to_bytes(8, "little") + b"ab\0" + b"\0"
           + (-2).to_bytes(4, "little", signed=True))
    assert out.decode(t, raw) == (-1, 5, "ab", -2)
    assert out.decode(AVG, (-9).to_bytes(8, "little", signed=True) + (2).to_bytes(8, "little")) \
        == (2, -9)


def test_printf_with_too_few_values_is_a_clear_error():
    with pytest.raises(out.OutputError, match="fewer values"):
        out.format_printf("%d %d\n", [(I64, 1)])
    from pyebpf.errors import PyebpfError
    assert issubclass(out.OutputError, PyebpfError) and issubclass(out.OutputError, ValueError)


def test_printf_conversions_are_the_ones_bpftrace_counts():
    # bpftrace 0.17 counts no %i, no +/space/# flags, no floats: those stay text
    assert out.printf_conversions("%d %i %+d %#x %5.2s %lu %% %r %p %f %c") == \
        ["d", "s", "u", "r", "p", "c"]


_libc = ctypes.CDLL(None)
_CTYPES = {None: ctypes.c_int, "h": ctypes.c_int, "hh": ctypes.c_int, "l": ctypes.c_long,
           "ll": ctypes.c_longlong, "z": ctypes.c_size_t, "j": ctypes.c_long}


def _c_printf(spec: str, length: str | None, conv: str, value: int) -> str:
    buf = ctypes.create_string_buffer(256)
    ctype = _CTYPES[length]
    bits = ctypes.sizeof(ctype) * 8
    v = value & ((1 << bits) - 1)
    if conv == "d" and v >> (bits - 1):
        v -= 1 << bits
    arg = ctype(v) if conv == "d" or ctype is not ctypes.c_size_t else ctypes.c_size_t(v)
    _libc.snprintf(buf, 256, spec.encode(), arg)
    return buf.value.decode()


@fuzz_settings(300)
@given(minus=st.booleans(), width=st.sampled_from(["", "0", "5", "012", "1"]),
       prec=st.sampled_from([None, "", "0", "3", "10"]),
       length=st.sampled_from([None, "h", "hh", "l", "ll", "z", "j"]),
       conv=st.sampled_from(list("duxXo")),
       value=st.one_of(st.integers(-2 ** 63, 2 ** 64 - 1),
                       st.sampled_from([0, -1, 255, 256, 65535, 2 ** 31, -2 ** 31])))
def test_printf_integer_conversions_are_cs(minus, width, prec, length, conv, value):
    """C's snprintf (libc) is the oracle: bpftrace hands the 64-bit value to it."""
    spec = ("%" + ("-" if minus else "") + width + ("" if prec is None else "." + prec)
            + (length or "") + conv)
    assert out.format_printf(spec, [(I64, value)]) == _c_printf(spec, length, conv, value)


@pytest.mark.kernel
def test_stacks_in_keys_values_and_print_like_bpftrace():
    """One stack printed by bpftrace in both modes while the process lives:
    the perf-mode lines give each frame's address, symbol and module, from
    which the formatter must print every layout bpftrace printed."""
    import re
    from .harness import bt_workload
    w = bt_workload()
    text = run_bpftrace(
        f"uprobe:{w}:lock_b_inner {{ @p[ustack(perf, 2)] = count(); print(@p); "
        "@[ustack(2)] = count(); print(@); @s = ustack(2); print(@s); print(ustack(2)); "
        "clear(@p); clear(@); clear(@s); exit(); }", command=f"{w} 200000 100")
    frames = [(int(a, 16), sym, mod) for a, sym, mod in
              re.findall(r"^\t([0-9a-f]+) (\S+) \((.*)\)$", text, re.M)[:2]]
    assert len(frames) == 2 and frames[0][1] == "lock_b_inner+0"
    bt = Type("ustack", stack_limit=2)
    perf = Type("ustack", stack_mode="perf", stack_limit=2)
    key = tuple(frames)
    ours = "".join([
        maps.format_map("@p", perf, COUNT, {key: 1}),
        maps.format_map("@", bt, COUNT, {key: 1}),
        maps.format_map("@s", None, bt, {None: frames}),
        out.format_value(bt, frames) + "\n",
    ])
    # (the probe may fire a few times before exit() takes effect: counts vary)
    text, ours = (re.sub(r"\]: \d+\n", "]: N\n", x) for x in (text, ours))
    assert text.startswith(ours), (ours, text)


def test_json_escapes_like_bpftrace():
    # bpftrace 0.17 writes each byte of a non-ASCII character as \uffffffXX
    theirs = run_bpftrace(r"""BEGIN { printf("é\ta\x01/\r|\x08|\x0c|\x7f|\x1f|\\|\"\n");
        @s["é\x01"] = 1; exit(); }""", "-f", "json").split("\n")
    assert theirs[1] == out.json_printf('é\ta\x01/\r|\x08|\x0c|\x7f|\x1f|\\|"\n')
    assert theirs[4] == maps.json_map("@s", S, I64, {"é\x01": 1})
    assert "\\uffffffc3\\uffffffa9" in theirs[1]


def test_an_empty_count_map_without_keys_prints_zero():
    # bpftrace 0.17: a keyless count() map cleared, deleted or never counted
    # prints "@: 0"; other empty maps a blank line
    count = Type("count", 8)
    assert maps.format_map("@", None, count, {}) == "@: 0\n"
    assert maps.json_map("@n", None, count, {}) == '{"type": "map", "data": {"@n": 0}}'
    assert maps.format_map("@s", None, Type("sum", 8, True), {}) == "\n"
    assert maps.format_map("@c", int_type(8, True), count, {}) == "\n"


def test_kernel_stacks_in_perf_mode_have_no_module():
    # bpftrace 0.17: "\tADDR SYMBOL" per kernel frame, "\tADDR SYMBOL (MODULE)" per user one
    frames = [(0xffffffff814b2b2d, "perf_syscall_enter+397", None), (0xffffffff81417d70, None, None)]
    kperf = Type("kstack", stack_mode="perf", stack_limit=2)
    assert out.format_value(kperf, frames) == \
        "\n\tffffffff814b2b2d perf_syscall_enter+397\n\tffffffff81417d70 0xffffffff81417d70\n"
    uperf = Type("ustack", stack_mode="perf", stack_limit=2)
    assert out.format_value(uperf, [(0x1410, "f+0", "/bin/x")]) == "\n\t1410 f+0 (/bin/x)\n"
