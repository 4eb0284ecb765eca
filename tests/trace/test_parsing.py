"""Pure parts of the tracing toolkit: probe specs, expressions, filters,
printf, asm headers (no kernel)."""
from __future__ import annotations

import pytest

from pyebpf.draw.render import format_printf, hist_json, unescape
from pyebpf.lang.aggregations import log2_bucket_range
from pyebpf.probes.sources import ProbeSpec, ProbeSpecError, parse_probe
from pyebpf.session.asmfile import AsmFileError, parse_asm_file
from pyebpf.trace.expr import ExprError, parse_expr, parse_filter


@pytest.mark.parametrize("text, spec", [
    ("uprobe:/bin/bash:readline", ProbeSpec("uprobe", "/bin/bash", "readline")),
    ("u:libc:malloc", ProbeSpec("uprobe", "libc", "malloc")),
    ("uretprobe:libc:malloc", ProbeSpec("uretprobe", "libc", "malloc")),
    ("ur:./a.out:f+4", ProbeSpec("uretprobe", "./a.out", "f+4")),
    ("usdt:/usr/bin/python3:python:function__entry",
     ProbeSpec("usdt", "/usr/bin/python3", "function__entry", "python")),
    ("U:/x:tick", ProbeSpec("usdt", "/x", "tick", None)),
    ("usdt:/x::tick", ProbeSpec("usdt", "/x", "tick", None)),
    ("tracepoint:syscalls:sys_enter_openat", ProbeSpec("tracepoint", "syscalls", "sys_enter_openat")),
    ("t:sched:sched_switch", ProbeSpec("tracepoint", "sched", "sched_switch")),
])
def test_probe_specs(text, spec):
    assert parse_probe(text) == spec
    assert parse_probe(str(spec)) == spec


@pytest.mark.parametrize("text, words", [
    ("kprobe:do_sys_open", "starts with a probe kind"),
    ("readline", "starts with a probe kind"),
    ("uprobe:/bin/bash", "uprobe:PATH:SYMBOL"),
    ("tracepoint:syscalls", "tracepoint:CATEGORY:NAME"),
    ("usdt:/x", "usdt:PATH:[PROVIDER:]NAME"),
    ("uprobe::f", "uprobe:PATH:SYMBOL"),
])
def test_bad_probe_specs(text, words):
    with pytest.raises(ProbeSpecError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_probe(text)


def test_expressions():
    e = parse_expr("arg1")
    assert (e.kind, e.atom, e.arg) == ("int", "arg", 1)
    e = parse_expr("latency / 1000")
    assert e.ops == (("/", 1000),) and e.uses("latency") and e.text == "latency / 1000"
    e = parse_expr("str(arg0)")
    assert e.kind == "str" and e.size == 64 and e.slot_size == 64 and e.args_used() == {0}
    e = parse_expr("str(arg2, 20)")
    assert e.size == 21 and e.slot_size == 24      # 20 characters and the NUL
    assert parse_expr("comm").size == 16
    assert parse_expr("args->filename").arg == "filename"
    assert parse_expr("args.flags & 0xff").ops == (("&", 255),)
    assert parse_expr("ustack").kind == "stack"
    assert parse_expr("(arg0 + 1) * 2").ops == (("+", 1), ("*", 2))
    assert parse_expr("str(arg0)", strlen=16).size == 16


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("arg", "unknown name"), ("arg0 +", "unexpected end"),
    ("arg0 + arg1", "integer constant"), ("comm + 1", "arithmetic"),
    ("str(comm)", "address"), ("str(arg0, 1000)", "1..256"), ("arg0 arg1", "unexpected"),
    ("args.", "unexpected end"), ("args+1", "args.NAME"), ("@x", "a map is not supported"),
])
def test_bad_expressions(text, words):
    with pytest.raises(ExprError, match=words):
        parse_expr(text)


def test_filters():
    f = parse_filter("arg0 > 100")
    assert f.op == ">" and f.left.text == "arg0" and f.right.arg == 100
    f = parse_filter('comm == "bash"')
    assert f.right == b"bash"
    f = parse_filter("str(arg0, 8) != \"a\\tb\"")
    assert f.right == b"a\tb" and f.op == "!="
    assert parse_filter("arg0").op == "!="      # (the language's truthiness: arg0 != 0)
    for bad, words in [("comm", "comparison"), ('arg0 == "x"', "string literal"),
                       ('comm < "x"', "== or !="), ('comm == arg0', "only integers"),
                       ('str(arg0, 4) == "abcde"', "longer")]:
        with pytest.raises(ExprError, match=words):
            parse_filter(bad)


def test_printf():
    assert format_printf("%d %u %x %s", [-1, -1, 255, b"ab\0cd"]) == \
        "-1 18446744073709551615 ff ab"
    assert format_printf("%-5s|%5d|%lu|%llx", ["ab", 42, 7, 255]) == "ab   |   42|7|ff"
    assert format_printf("%c%c %p %%", [72, 105, 4096]) == "Hi 0x1000 %"
    assert unescape(r"a\tb\n\\") == "a\tb\n\\"


def test_hist_json():
    assert hist_json({2: 1, 4: 3}, log2_bucket_range) == [
        {"min": 1, "max": 1, "count": 1}, {"min": 2, "max": 3, "count": 0},
        {"min": 4, "max": 7, "count": 3}]
    assert hist_json({}, log2_bucket_range) == []


HEADER = """\
# pyebpf: description counts the calls of ${FUNC}
# pyebpf: param BINARY the binary's path
# pyebpf: param FUNC=work the function
# pyebpf: map calls hash key=u64 value=u64 entries=64 show=count
# pyebpf: map names hash key=char[16] value=u32
# pyebpf: map h percpu_array value=u64 entries=10 show=lhist:0:100:10
# pyebpf: map events perf_event_array
# pyebpf: output events fields=a:u32,b:u64,c:char[5] format="%d %d %s"
# pyebpf: program p1 attach=uprobe:${BINARY}:${FUNC}
    r0 = 0
    exit
# pyebpf: program p2 attach=uretprobe:${BINARY}:${FUNC} type=kprobe
    r0 = 1
    exit
"""


def test_asm_header():
    af = parse_asm_file(HEADER, "x.s")
    assert af.description == "counts the calls of ${FUNC}"
    assert af.params["BINARY"].default is None and af.params["FUNC"].default == "work"
    assert af.params["BINARY"].help == "the binary's path"
    assert af.maps["calls"].show == "count" and af.maps["calls"].entries == 64
    assert af.maps["names"].key.is_string and af.maps["names"].key.size == 16
    assert af.maps["h"].linear == (0, 100, 10)
    out = af.outputs[0]
    assert out.struct_format() == "<I4xQ5s3x"
    assert [p.name for p in af.programs] == ["p1", "p2"]
    assert af.programs[1].type == "kprobe"
    assert [t for _, t in af.programs[0].body if t.strip()] == ["    r0 = 0", "    exit"]
    assert af.programs[0].body[0][0] == 10          # line numbers are kept
    assert "BINARY" in af.info() and "required" in af.info()


@pytest.mark.parametrize("text, words", [
    ("    r0 = 0\n    exit\n", "no '# pyebpf: program"),
    ("# pyebpf: map m hashh\n# pyebpf: program p attach=u:a:b\n", "unknown map type"),
    ("# pyebpf: map m hash key=u7\n# pyebpf: program p attach=u:a:b\n", "unknown type"),
    ("# pyebpf: map m hash show=bars\n# pyebpf: program p attach=u:a:b\n", "show=bars"),
    ("# pyebpf: frobnicate\n", "unknown directive"),
    ("# pyebpf: program p\n", "attach=PROBE"),
    ("# pyebpf: output ev fields=a:u32\n# pyebpf: program p attach=u:a:b\n",
     "perf_event_array or ringbuf"),
    ("# pyebpf: map m hash size=3\n# pyebpf: program p attach=u:a:b\n", "unexpected 'size=3'"),
])
def test_asm_header_errors(text, words):
    with pytest.raises(AsmFileError, match=words) as ei:
        parse_asm_file(text, "bad.s")
    assert str(ei.value).startswith("bad.s")


def test_symbolizer_by_address_and_by_build_id(workload):
    """Plain addresses go through /proc/PID/maps; build-id frames through the
    files searched (the probed binary, its DT_NEEDED libraries...)."""
    import subprocess

    from pyebpf import elf
    from pyebpf.symbols.stacks import STACK_IP, STACK_VALID, Symbolizer, demangle
    proc = subprocess.Popen([workload, "100000000", "1000"], stdout=subprocess.DEVNULL)
    try:
        from waiting import wait_until
        ef = elf.open_elf(workload)
        sym = ef.symbol("outer")
        mods = wait_until(lambda: [m for m in elf.process_modules(proc.pid) if m.path == workload],
                          "the workload to be mapped by its process")
        addr = mods[0].runtime_address(sym.address + 10)
        s = Symbolizer()
        assert s.frame(addr, proc.pid) == "outer+10"
        assert s.frame((STACK_IP, bytes(20), addr), proc.pid, index=1) == "outer+10"
    finally:
        proc.kill()
        proc.wait()
    s = Symbolizer([workload])
    off = ef.address_to_offset(sym.address + 4)
    assert s.frame((STACK_VALID, ef.build_id, off)) == "outer+4"
    # libc comes from the workload's DT_NEEDED, found by its build id
    libc = elf.resolve_library("libc.so.6")
    lef = elf.open_elf(libc)
    malloc = lef.resolve("malloc")
    assert s.frame((STACK_VALID, lef.build_id, malloc.file_offset)).startswith("malloc+0") or \
        s.frame((STACK_VALID, lef.build_id, malloc.file_offset)).endswith("+0")
    assert s.frame((STACK_VALID, b"\x01" * 20, 0x1234)).startswith("0x1234 (offset in build id")
    assert s.frame(0x1234, None) == "0x1234"
    assert demangle(["_ZN1a1bEv", "main"]) in ({"_ZN1a1bEv": "a::b()", "main": "main"},
                                                {"_ZN1a1bEv": "_ZN1a1bEv", "main": "main"})


def test_issue14_negative_constants_and_str_lengths():
    """Negative literals parse (``arg1 < -20``); ``str(E, N)`` holds N characters."""
    f = parse_filter("arg1 < -20")
    assert f.right.arg == -20 and f.op == "<"
    assert parse_expr("-0x10").arg == -16
    with pytest.raises(ExprError, match="signed 64 bits"):
        parse_expr("-9223372036854775809")
    assert parse_expr("str(arg0, 4)").size == 5          # 4 characters and the NUL
    assert parse_expr("str(arg0, 4)").text == "str(arg0, 4)"
    assert parse_expr("str(arg0)", 64).size == 64
