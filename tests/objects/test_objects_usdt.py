"""libbpf's USDT protocol: C programs built against ``bpf/usdt.bpf.h``
(Debian's clang and libbpf-dev) read USDT arguments through pyebpf's
attach -- a gcc-built target's probes (-O0 and -O2: signed, unsigned,
constants, memory, globals, twelve arguments, two sites with different
specs, a semaphore) and CPython 3.11's function__entry -- with the values
the targets passed; cookies, ``-p PID``, semaphores restored on detach,
specs shared and recycled; libbpf (bpftool) loads what pyebpf loads."""
from __future__ import annotations

import errno
import gc
import os
import pathlib
import struct
import subprocess
import time

import pytest
from systools import PYTHON as SYSTEM_PYTHON

import pyebpf
from pyebpf.errors import UsdtProbeLookupError, UsdtSpecError, UsdtTargetError
from pyebpf.events import RingBufferReader
from pyebpf.kernel import features
from pyebpf.kernel.constants import AttachType
from pyebpf.objects import ObjectError, open_object
from pyebpf.objects.usdt import SPECS_MAP, SpecLayout, _Field, arg_record, encode_spec
from pyebpf.usdt import UsdtFile, parse_arg

from waiting import read_line

from .conftest import GCC, HERE, compile_bpf, libbpf_loads

# (each test that needs the kernel is marked `kernel`; the others run under every Python)

PYTHON = SYSTEM_PYTHON
U64 = (1 << 64) - 1
#: struct args_event of usdt_progs.c
ARGS_EVENT = struct.Struct("<IiQI12i4x12q")
#: struct entry_event of usdt_progs.c
ENTRY_EVENT = struct.Struct("<IiQ128s64s")
#: the probes of usdt_target.c that fire without a tracer's semaphore
PROBES = ("ints", "consts", "fields", "globals", "twelve", "site")
MULTIARCH = f"-I/usr/include/{os.uname().machine}-linux-gnu"     # <asm/errno.h>


def _sdt_include() -> list[str]:
    for d in ("/usr/include", MULTIARCH[2:]):
        if os.path.exists(os.path.join(d, "sys", "sdt.h")):
            return [f"-I{d}"]
    pytest.skip("sys/sdt.h is not installed (systemtap-sdt-dev)")


@pytest.fixture(scope="module")
def usdt_obj(objects) -> str:
    """usdt_progs.c built like the other test objects (vmlinux.h of the
    ``objects`` fixture), plus the multiarch include usdt.bpf.h needs."""
    out = pathlib.Path(objects["execsnoop"]).parent
    return compile_bpf(HERE / "c" / "usdt_progs.c", out, "usdt_progs.o", MULTIARCH)


@pytest.fixture(scope="module")
def targets(tmp_path_factory) -> dict[str, str]:
    """usdt_target built by gcc at -O0 and -O2."""
    if GCC is None:
        pytest.skip("gcc builds the USDT target")
    inc = _sdt_include()
    out = tmp_path_factory.mktemp("usdt_target")
    built = {}
    for opt in ("O0", "O2"):
        exe = out / f"usdt_target-{opt}"
        subprocess.run([GCC, "-g", f"-{opt}", *inc, "-o", str(exe),
                        str(HERE / "c" / "usdt_target.c"),
                        str(HERE / "c" / "usdt_target_sema.c")], check=True)
        built[opt] = str(exe)
    return built


def _expected(stdout: str) -> dict[str, list[list[int]]]:
    """The target's ``NAME v1 v2...`` lines: {name: [[v1, v2...], ...]}."""
    out: dict[str, list[list[int]]] = {}
    for line in stdout.splitlines():
        name, *values = line.split()
        out.setdefault(name, []).append([int(v) for v in values])
    return out


def _read(reader, n: int, timeout: float = 5.0) -> list:
    got: list = []
    end = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < end:
        got += reader.read_batch(timeout=0.2)
    return got + reader.read_batch(timeout=0.05)


class _Waiting:
    """A target started with ``wait``: it prints ``ready`` and runs on a line."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.pid = self.proc.pid
        assert read_line(self.proc.stdout, "the target to be ready").startswith("ready")

    def finish(self) -> str:
        return self.proc.communicate("go\n", timeout=30)[0]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def _semaphore(pid: int, path: str) -> int:
    """tgt:guarded's semaphore in process ``pid``."""
    from pyebpf import elf
    (note,) = UsdtFile(path).probes("tgt", "guarded")[0].locations
    st = os.stat(path)
    mod = next(m for m in elf.process_modules(pid) if m.maps and m.maps[0].inode == st.st_ino)
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
        f.seek(mod.runtime_address(note.semaphore_address))
        return int.from_bytes(f.read(2), "little")


# ---------------------------------------------------------------------------
# loading: libbpf's verdict

@pytest.mark.kernel
def test_usdt_objects_load_as_libbpf_loads_them(usdt_obj, targets, tmp_path):
    sec_obj = compile_bpf(HERE / "c" / "usdt_progs.c", tmp_path, "usdt_sec.o", MULTIARCH,
                          f'-DTARGET="{targets["O2"]}"',
                          f"-I{os.path.dirname(usdt_obj)}")
    for path in (usdt_obj, sec_obj):
        ok, err = libbpf_loads(path)
        assert ok, err
        with open_object(path) as obj:
            assert SPECS_MAP in obj.map_defs
            assert all(p.kind == "usdt" for p in obj.programs.values())
            obj.load(strict=False)
            assert {p.name: p.status for p in obj.programs.values()} == \
                dict.fromkeys(obj.programs, "loaded")


# ---------------------------------------------------------------------------
# arguments

@pytest.mark.kernel
@pytest.mark.parametrize("opt", ["O0", "O2"])
def test_every_argument_reads_the_value_passed(usdt_obj, targets, opt):
    """bpf_usdt_arg() of each argument of each probe equals what the target
    printed (reg/deref/const/rip-relative forms; signed and unsigned of 1, 2,
    4 and 8 bytes); bpf_usdt_arg_cnt() is the probe's count, arguments past
    it give -ENOENT; bpf_usdt_cookie() is each attachment's cookie."""
    exe = targets[opt]
    kinds = {a.kind.value for pr in UsdtFile(exe).probes("tgt") for n in pr.locations
             for a in n.arguments}
    assert {"const", "reg" if opt == "O2" else "deref", "deref"} <= kinds
    assert opt == "O0" or "rip" in kinds
    with pyebpf.load_object(usdt_obj) as obj:
        prog = obj.programs["read_all"]
        cookies = {name: 1000 + i for i, name in enumerate(PROBES)}
        cookies["ints"] = U64 - 5                       # a full u64 comes back whole
        for name in PROBES:
            link = prog.attach_usdt(exe, "tgt", name, cookie=cookies[name])
            assert link.kind == "usdt"
        with RingBufferReader(obj.maps["events"], decode=ARGS_EVENT.unpack) as reader:
            out = subprocess.run([exe, "2"], capture_output=True, text=True,
                                 check=True).stdout
            want = _expected(out)
            n = sum(len(want[p]) for p in PROBES)
            got = _read(reader, n)
    by_cookie = {c: p for p, c in cookies.items()}
    seen: dict[str, list[list[int]]] = {}
    for pid, cnt, cookie, tag, *rest in got:
        rets, values = rest[:12], rest[12:]
        name = by_cookie[cookie]
        assert tag == 0
        assert rets == [0] * cnt + [-errno.ENOENT] * (12 - cnt), (name, rets)
        seen.setdefault(name, []).append([v & U64 for v in values[:cnt]])
    for name in PROBES:
        expected = [[v & U64 for v in row] for row in want[name]]
        assert sorted(seen.get(name, [])) == sorted(expected), name


@pytest.mark.kernel
def test_sites_with_different_specs_share_nothing_and_equal_specs_share_ids(usdt_obj,
                                                                           targets):
    """tgt:site has two sites whose specs differ: two spec ids.  Attaching it
    again with the same cookie reuses them; another cookie is another spec;
    ids come back when the links are detached."""
    exe = targets["O2"]
    with pyebpf.load_object(usdt_obj) as obj:
        prog = obj.programs["read_all"]
        a = prog.attach_usdt(exe, "tgt", "site", cookie=5)
        if features.has_uprobe_multi():      # loaded for it, as libbpf 1.3+ loads usdt programs
            assert prog.expected_attach_type == AttachType.TRACE_UPROBE_MULTI
            assert a.method == "uprobe_multi" and len(a.link_ids) == 1
        specs = obj._usdt_specs
        assert len(a.cookies) == 2 and len(set(a.cookies)) == 2
        assert specs.in_use == 2
        b = prog.attach_usdt(exe, "tgt", "site", cookie=5)
        assert b.cookies == a.cookies and specs.in_use == 2
        c = prog.attach_usdt(exe, "tgt", "site", cookie=6)
        assert not set(c.cookies) & set(a.cookies) and specs.in_use == 4
        a.detach()
        assert specs.in_use == 4                        # b still uses them
        b.detach()
        c.detach()
        assert specs.in_use == 0
        d = prog.attach_usdt(exe, "tgt", "ints")
        assert d.cookies[0] in a.cookies + c.cookies    # recycled, not a new id
        d.detach()


@pytest.mark.kernel
def test_python_function_entry_by_section_name_for_one_pid(usdt_obj, tmp_path):
    """CPython 3.11's function__entry read with BPF_USDT (two strings and an
    int) by programs attached by their section names, for the child's pid
    only (python:line must be enabled too: cpython#98894)."""
    if not os.path.exists(PYTHON):
        pytest.skip(f"no {PYTHON}")
    script = tmp_path / "traced_script.py"
    script.write_text("import sys\nsys.stdin.readline()\n\n\ndef traced_fn(x):\n"
                      "    return x\n\n\nlist(map(traced_fn, range(3)))\n")
    child = subprocess.Popen([PYTHON, str(script)], stdin=subprocess.PIPE, text=True)
    try:
        with pyebpf.load_object(usdt_obj) as obj:
            entry = obj.programs["python_entry"].attach(pid=child.pid, cookie=77)
            obj.programs["python_line"].attach(pid=child.pid)
            assert entry.pid == child.pid
            with RingBufferReader(obj.maps["entries"], decode=ENTRY_EVENT.unpack) as reader:
                child.communicate("go\n", timeout=30)
                got = _read(reader, 1 << 20, timeout=1.0)
            assert obj.globals["lines"] > 0
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    events = [(pid, line, cookie, f.rstrip(b"\0").decode(), fn.rstrip(b"\0").decode())
              for pid, line, cookie, f, fn in got]
    assert {e[0] for e in events} == {child.pid}
    assert {e[2] for e in events} == {77}
    hits = [e[1:] for e in events if e[4] == "traced_fn"]
    assert hits == [(5, 77, str(script), "traced_fn")] * 3


# ---------------------------------------------------------------------------
# pid, semaphores, attach_all

@pytest.mark.kernel
def test_pid_attaches_to_one_process(usdt_obj, targets):
    """``pid=``: only that process's hits arrive (the binary given, or none:
    every module of the process)."""
    exe = targets["O2"]
    procs = [_Waiting([exe, "1", "wait"]) for _ in range(3)]
    try:
        with pyebpf.load_object(usdt_obj) as obj:
            prog = obj.programs["read_all"]
            prog.attach_usdt(exe, "tgt", "ints", pid=procs[0].pid, cookie=1)
            prog.attach_usdt(None, "tgt", "consts", pid=procs[1].pid, cookie=2)
            with RingBufferReader(obj.maps["events"], decode=ARGS_EVENT.unpack) as reader:
                for p in procs:
                    p.finish()
                got = _read(reader, 2)
    finally:
        for p in procs:
            p.kill()
    assert sorted((e[0], e[2]) for e in got) == [(procs[0].pid, 1), (procs[1].pid, 2)]
    assert got[0][4 + 12] in (-5, 42)


@pytest.mark.kernel
def test_semaphores_enabled_while_attached_restored_on_detach(usdt_obj, targets):
    """tgt:guarded is semaphore-guarded: attaching raises it in a running
    process (the probe fires), detaching or closing the object restores it."""
    exe = targets["O0"]
    first = _Waiting([exe, "1", "wait"])
    second = _Waiting([exe, "1", "wait"])
    try:
        assert _semaphore(first.pid, exe) == 0
        obj = pyebpf.load_object(usdt_obj)
        with obj:
            link = obj.programs["read_all"].attach_usdt(exe, "tgt", "guarded", cookie=3)
            assert _semaphore(first.pid, exe) == 1
            with RingBufferReader(obj.maps["events"], decode=ARGS_EVENT.unpack) as reader:
                assert "guarded 1 0" in first.finish()
                (ev,) = _read(reader, 1)
            assert ev[0] == first.pid and ev[2] == 3 and ev[1] == 1 and ev[4 + 12] == 0
            link.detach()
            assert _semaphore(second.pid, exe) == 0
            obj.programs["read_all"].attach_usdt(exe, "tgt", "guarded")
            assert _semaphore(second.pid, exe) == 1
        assert _semaphore(second.pid, exe) == 0             # the object closed its link
        assert "guarded 0 0" in second.finish()
    finally:
        first.kill()
        second.kill()


@pytest.mark.kernel
def test_attach_all_by_section_names(usdt_obj, targets, tmp_path):
    """SEC("usdt/PATH:tgt:ints") and SEC("usdt/PATH:tgt:guarded"): attach_all()
    attaches them, and leaves the bare SEC("usdt") alone (it raised)."""
    exe = targets["O2"]
    path = compile_bpf(HERE / "c" / "usdt_progs.c", tmp_path, "usdt_sec.o", MULTIARCH,
                       f'-DTARGET="{exe}"', f"-I{os.path.dirname(usdt_obj)}")
    with pyebpf.load_object(path) as obj:
        links = obj.attach_all()
        assert len(links) == 2 and len(obj.programs) == 3
        with RingBufferReader(obj.maps["events"], decode=ARGS_EVENT.unpack) as reader:
            out = subprocess.run([exe, "1"], capture_output=True, text=True,
                                 check=True).stdout
            got = _read(reader, 2)
    want = _expected(out)
    assert want["guarded"] == [[1, 0]]
    by_tag = {e[3]: [v & U64 for v in e[4 + 12:4 + 12 + e[1]]] for e in got}
    assert by_tag == {1: [v & U64 for v in want["ints"][0]], 2: [0]}


# ---------------------------------------------------------------------------
# errors

@pytest.mark.kernel
def test_errors(usdt_obj, targets, objects):
    exe = targets["O2"]
    with pyebpf.load_object(usdt_obj) as obj:
        prog = obj.programs["read_all"]
        with pytest.raises(UsdtProbeLookupError) as ei:
            prog.attach_usdt(exe, "tgt", "intz")
        assert "tgt:ints" in str(ei.value)                  # the probes that exist
        for bad in (-1, 1 << 64, "7", True):
            with pytest.raises(ObjectError, match="u64"):
                prog.attach_usdt(exe, "tgt", "ints", cookie=bad)
        with pytest.raises(ObjectError, match="attach_usdt"):
            prog.attach()                                   # SEC("usdt") names no probe
        with pytest.raises(UsdtTargetError):
            prog.attach_usdt("/nonexistent/binary", "tgt", "ints")
        assert not obj._links
        prog.attach_usdt(exe, "tgt", "ints").detach()
        specs = obj._usdt_specs
        specs.max_entries = 1                               # BPF_USDT_MAX_SPEC_CNT 1
        with pytest.raises(ObjectError, match="full"):
            prog.attach_usdt(exe, "tgt", "site")            # two sites, two specs
        assert specs.in_use == 0                            # the first one given back
        assert len(obj._links) == 1
    # an object without usdt.bpf.h: its program attaches, a cookie cannot be read
    with pyebpf.load_object(objects["uprobe"]) as obj:
        prog = obj.programs["on_add"]
        with pytest.raises(ObjectError, match="cookie"):
            prog.attach_usdt(exe, "tgt", "ints", cookie=1)
        prog.attach_usdt(exe, "tgt", "ints")
        subprocess.run([exe, "3"], check=True, capture_output=True)
        assert obj.globals["calls"] == 3


def _note(targets, probe="ints"):
    return UsdtFile(targets["O2"]).probes("tgt", probe)[0].locations[0]


def _layout(usdt_obj) -> SpecLayout:
    with open_object(usdt_obj) as obj:
        d = obj.map_defs[SPECS_MAP]
        return SpecLayout.from_btf(obj.btf, d.value_type_id)


@pytest.mark.parametrize("text, reason", [
    ("8f@%xmm0", "floating-point"),
    ("1@%ah", "bits 8"),
    ("-4@%fs:8", "thread-local"),
    ("-4@(%rdi,%rsi,4)", "BPF_USDT_ARG_SIB"),        # Debian's usdt.bpf.h (libbpf 1.1)
    ("-4@8(,%rsi,4)", "no base"),
    ("8@$g_total", "address operand in a PIE"),         # the target is a PIE
    ("4@1234", "absolute operand in a PIE"),
    ("1@g_total(%rsi)", "BPF_USDT_ARG_SIB"),            # &sym + reg in a PIE: ip-based SIB
    ("-4@nosuchsym(%rip)", "cannot place symbol"),
])
def test_a_form_usdt_bpf_h_cannot_read_is_refused_naming_it(usdt_obj, targets, text, reason):
    note = _note(targets)
    with pytest.raises(UsdtSpecError, match=reason) as ei:
        arg_record(parse_arg(text), note, 3, _layout(usdt_obj))
    err = ei.value
    assert err.probe == "tgt:ints" and err.index == 3 and err.spec == text
    assert targets["O2"] in str(err)                        # the location


def test_spec_bytes_in_debian_libbpf_layout(usdt_obj, targets):
    """Debian's usdt.bpf.h (libbpf 1.1): 16-byte args (u64 val_off, 4-byte
    enum arg_type, short reg_off, bool arg_signed, char arg_bitshift),
    usdt_cookie at 192, arg_cnt at 200, 208 bytes."""
    layout = _layout(usdt_obj)
    assert (layout.size, layout.arg_size, layout.max_args, layout.has_sib) == (208, 16, 12,
                                                                               False)
    note = _note(targets, "fields")                         # -8@(%rdi) -4@8(%rdi) ...
    raw = encode_spec(note, layout, cookie=0x1122334455667788)
    val_off, arg_type, reg_off, signed, shift = struct.unpack_from("<QIhBb", raw, 16)
    assert (val_off, arg_type, reg_off, signed, shift) == (8, 2, 112, 1, 32)   # 8(%rdi)
    assert struct.unpack_from("<Qh", raw, 192) == (0x1122334455667788, 5)
    consts = encode_spec(_note(targets, "consts"), layout)  # 2@$-15536: u16 50000
    assert struct.unpack_from("<QIhBb", consts, 32) == ((-15536) & U64, 0, 0, 0, 48)


def test_sib_and_symbols_with_a_sib_header_layout(targets):
    """A header with BPF_USDT_ARG_SIB (libbpf 1.7's bitfields, at the bit
    offsets clang gives them): base + index << scale + offset; sym(%reg) and
    sym(,%idx,s) in a PIE become ip-based SIB; sym(%rip) ip-relative."""
    arg = {"val_off": _Field(0, 64), "arg_type": _Field(64, 8), "idx_reg_off": _Field(80, 12),
           "scale_bitshift": _Field(92, 4), "reg_off": _Field(112, 16),
           "arg_signed": _Field(128, 8), "arg_bitshift": _Field(136, 8)}
    spec = {"usdt_cookie": _Field(12 * 24 * 8, 64), "arg_cnt": _Field(12 * 24 * 8 + 64, 16)}
    layout = SpecLayout(304, 0, 24, 12, arg, spec,
                        {"CONST": 0, "REG": 1, "REG_DEREF": 2, "SIB": 3})
    assert layout.has_sib
    note = _note(targets)
    r = arg_record(parse_arg("-8@80(%rsp,%rax,8)"), note, 0, layout)
    assert (r.kind, r.val_off, r.reg_off, r.idx_reg_off, r.scale_bitshift) == \
        ("SIB", 80, 152, 80, 3)
    raw = layout.encode([r], 0)
    assert raw[8] == 3 and struct.unpack_from("<H", raw, 10)[0] == 80 | 3 << 12
    assert struct.unpack_from("<hBb", raw, 14) == (152, 1, 0)
    from pyebpf.usdt.args import _resolve_symbol
    g = _resolve_symbol(targets["O2"], "g_total", {})
    r = arg_record(parse_arg("1@g_total(%rsi)"), note, 0, layout)
    assert (r.kind, r.reg_off, r.idx_reg_off, r.val_off) == ("SIB", 128, 104,
                                                             (g - note.address) & U64)
    r = arg_record(parse_arg("-4@g_total+8(,%rdi,4)"), note, 0, layout)
    assert (r.kind, r.reg_off, r.idx_reg_off, r.scale_bitshift, r.val_off) == \
        ("SIB", 128, 112, 2, (g + 8 - note.address) & U64)
    r = arg_record(parse_arg("-8@g_total(%rip)"), note, 0, layout)
    assert (r.kind, r.reg_off, r.val_off) == ("REG_DEREF", 128, (g - note.address) & U64)


@pytest.mark.kernel
def test_link_owns_what_it_is_given(targets):
    """Link.own: closed after the link's fds on detach, and when the link is
    collected without a detach; refused on a detached link."""
    from pyebpf.attach import attach_uprobe
    from pyebpf.program import Program

    class Thing:
        closed = 0

        def close(self) -> None:
            Thing.closed += 1

    def prog() -> Program:
        p = Program("own")
        p.ret(0)
        return p

    link = attach_uprobe(prog(), targets["O2"], "consts")
    link.own(Thing())
    assert Thing.closed == 0
    link.detach()
    assert Thing.closed == 1
    with pytest.raises(Exception, match="detached"):
        link.own(Thing())
    link = attach_uprobe(prog(), targets["O2"], "consts")
    link.own(Thing())
    del link
    gc.collect()
    assert Thing.closed == 2


@pytest.mark.kernel
def test_usdt_attach_cookies_one_per_location(targets):
    from pyebpf.usdt import usdt
    u = usdt(targets["O2"], "tgt:site")
    with pytest.raises(UsdtTargetError, match="one per location"):
        u.attach(None, cookies=[1])


@pytest.mark.kernel
def test_attach_all_leaves_bare_uprobes_alone(objects):
    """uprobe.bpf.c's SEC("uprobe")/SEC("uretprobe") name no target:
    attach_all() leaves them for attach(binary, where) (it raised)."""
    with pyebpf.load_object(objects["uprobe"]) as obj:
        assert obj.attach_all() == []
        with pytest.raises(ObjectError, match="BINARY:SYMBOL"):
            obj.programs["on_add"].attach()
