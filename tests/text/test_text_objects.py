"""The disassembly of clang-built objects (``pyebpf disasm OBJ.o``,
:func:`pyebpf.objects.listing.disassemble_object`), against the objects of
tests/objects/c, tests/btf/c (clang -O2 -g, vmlinux.h from bpftool) and
tests/text/c (-mcpu=v3, no BTF) and against ``llvm-objdump -d -r -S``.

What remains different from llvm-objdump (asserted below, nothing else is):

* a call waiting for its relocation is ``call pc-1`` (``call pc+3``...), not
  llvm's ``call -1``, which does not say src_reg=1 (see pyebpf.text.llvm);
* a jump names its target label (``goto LBB1_2``), llvm the offset and the
  label (``goto +3 <LBB1_2>``); a target without a symbol gets a synthetic
  label (``L20``, ``s5_L20`` when several sections are listed) where llvm
  writes ``<LBB1_4+0x10>``; an unrelocated call inside a section names its
  callee (``call fib``) where llvm writes ``call 3``; the slot index column
  is ``%6d: `` where llvm's is ``%8d:\\t``;
* relocations are comments on the instruction (``# map counts``, ``# call
  bump``...) where llvm prints a line ``R_BPF_64_64 counts`` under it, and
  CO-RE relocations (which llvm-objdump does not show) are comments too;
* source lines come from the BTF line info, not DWARF: a function starts
  with its declaration's line where llvm shows ``{``, and where DWARF has
  rows the line info has not, llvm shows a line (again) that pyebpf does not;
* 32-bit loads and stores print r registers (llvm with --mattr=+alu32: w),
  32-bit atomics w registers (llvm without it: r, or <unknown>).
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from budget import fuzz_settings
from pyebpf.btf import Btf, BtfExt
from pyebpf.errors import AssemblyError, PyebpfError
from pyebpf.objects import ObjectError
from pyebpf.objects.elfobj import ObjElf
from pyebpf.objects.listing import code_sections, disassemble_object
from pyebpf.text import assemble

TESTS = pathlib.Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
CLANG = shutil.which("clang") or shutil.which("clang-14")
OBJDUMP = shutil.which("llvm-objdump") or shutil.which("llvm-objdump-14")
BPFTOOL = shutil.which("bpftool")
VMLINUX = "/sys/kernel/btf/vmlinux"
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

pytestmark = pytest.mark.skipif(
    CLANG is None or OBJDUMP is None or BPFTOOL is None or not os.path.exists(VMLINUX)
    or not os.path.exists("/usr/include/bpf/bpf_helpers.h"),
    reason="clang, llvm-objdump, bpftool, libbpf-dev and the kernel's BTF build the objects")


@pytest.fixture(scope="module")
def objects(tmp_path_factory) -> dict[str, pathlib.Path]:
    """``{name: path}`` of every C test object of the project."""
    out = tmp_path_factory.mktemp("objdis")
    with open(out / "vmlinux.h", "w") as fh:
        subprocess.run([BPFTOOL, "btf", "dump", "file", VMLINUX, "format", "c"], stdout=fh,
                       check=True)
    built = {}
    for src in sorted((TESTS / "objects" / "c").glob("*.bpf.c")) + \
            sorted((TESTS / "btf" / "c").glob("*.bpf.c")):
        obj = out / (src.name[:-2] + ".o")
        subprocess.run([CLANG, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-I",
                        str(out), "-c", str(src), "-o", str(obj)], check=True,
                       capture_output=True)
        built[src.name.removesuffix(".bpf.c")] = obj
    for src in sorted((TESTS / "text" / "c").glob("*.c")):
        obj = out / (src.stem + ".o")
        subprocess.run([CLANG, "-O2", "-mcpu=v3", "-target", "bpf", "-c", str(src), "-o",
                        str(obj)], check=True, capture_output=True)
        built[src.stem] = obj
    assert {"multi", "core_read", "execsnoop", "calls", "alu"} <= set(built)
    return built


def code_bytes(path: pathlib.Path, section: str | None = None) -> bytes:
    elf = ObjElf(path.read_bytes(), str(path))
    return b"".join(s.data for s in code_sections(elf) if section in (None, s.name))


def parse_listing(text: str) -> dict[str, dict]:
    """section -> {"sym": {slot: name}, "insn": {slot: text}, "note": {slot: comment},
    "rel": {slot: (type, symbol)}, "src": {slot: [source lines]}}, from our listing or
    llvm-objdump's."""
    secs: dict[str, dict] = {}
    sec: dict | None = None
    src: list[str] = []
    for line in text.splitlines():
        m = re.match(r"Disassembly of section (.*):$", line)
        if m:
            sec = secs.setdefault(m.group(1), {k: {} for k in ("sym", "insn", "note", "rel",
                                                                "src")})
            continue
        if sec is None:
            continue
        m = re.match(r"([0-9a-f]{16}) <(.*)>:$", line)
        if m:
            sec["sym"][int(m.group(1), 16) // 8] = m.group(2)
            continue
        if line.startswith("; "):
            src.append(line[2:].strip())
            continue
        m = re.match(r"\s+([0-9a-f]+):\s+(R_BPF\w+)\s+(\S+)$", line)
        if m:
            sec["rel"][int(m.group(1), 16) // 8] = (m.group(2), m.group(3))
            continue
        m = re.match(r"\s*(\d+):\s(.*)$", line)
        if m:
            slot, text_ = int(m.group(1)), m.group(2).strip()
            text_, _, note = text_.partition("  # ")
            sec["insn"][slot], sec["note"][slot] = text_, note
            if src:
                sec["src"][slot], src = src, []
    return secs


def objdump(path: pathlib.Path, *extra: str) -> str:
    return subprocess.run([OBJDUMP, "-d", "-r", "--no-show-raw-insn", *extra, str(path)],
                          check=True, capture_output=True, text=True).stdout


def pyebpf(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyebpf", *args], input=stdin,
                          capture_output=True, env=ENV, cwd=ROOT, timeout=60)


# ---------------------------------------------------------------------------
# round trips

def test_listing_assembles_to_the_code_sections(objects):
    for name, path in objects.items():
        want = code_bytes(path)
        for annotate in (True, False):
            for style in ("objdump", "verifier"):
                text = disassemble_object(path, annotate=annotate, style=style)
                assert assemble(text, "llvm", name).encode() == want, (name, annotate, style)
        for annotate in (True, False):
            text = disassemble_object(path, dialect="mnemonic", annotate=annotate)
            assert assemble(text, "mnemonic", name).encode() == want, name
        for sec in code_sections(ObjElf(path.read_bytes())):
            text = disassemble_object(path, sec.name)
            assert assemble(text, "llvm", name).encode() == sec.data, (name, sec.name)


def test_plain_listing_has_labels_and_instructions_only(objects):
    text = disassemble_object(objects["multi"], annotate=False)
    assert "# section .text\nbump:\n    r6 = r2\n" in text
    assert "\nLBB1_2:\n" in text and "goto LBB1_2" in text
    assert "Disassembly" not in text and "; " not in text and "CO-RE" not in text
    assert "call pc-1\n" in text and "r1 = 0 ll\n" in text    # no relocation notes


# ---------------------------------------------------------------------------
# against llvm-objdump

def test_listing_matches_llvm_objdump(objects):
    """Symbols, instructions, relocations and source lines, slot by slot; the
    differences left are those of the module docstring."""
    compared = relocs = lines = 0
    for name, path in objects.items():
        ours = parse_listing(disassemble_object(path))
        llvm = parse_listing(objdump(path, "-S"))
        alu32 = parse_listing(objdump(path, "--mattr=+alu32"))
        assert set(ours) == set(llvm), name
        for sec, theirs in llvm.items():
            us = ours[sec]
            where = (name, sec)
            assert us["sym"] == theirs["sym"], where
            for slot, text in theirs["insn"].items():
                mine = us["insn"][slot]
                if mine.startswith("lock *(u32") or re.match(r"w\d+ = (atomic_|xchg|cmpx)", mine):
                    text = alu32[sec]["insn"][slot]     # 32-bit atomics: LLVM 14 needs alu32
                m = re.match(r"(.*goto) [+-]\d+ <(.*)>$", text)
                if m:
                    text = f"{m.group(1)} {m.group(2)}"
                m = re.match(r"call (-?\d+)$", text)
                if m and slot in theirs["rel"]:
                    text = f"call pc{int(m.group(1)):+d}"
                assert mine == text, (where, slot)
                compared += 1
            for slot, (_, sym) in theirs["rel"].items():
                assert us["note"][slot], (where, slot, sym)
                relocs += 1
            for slot, note in us["note"].items():
                if note and slot not in theirs["rel"]:
                    assert note.startswith(("CO-RE: ", "bpf_")), (where, slot, note)
            funcs = {slot for slot, n in us["sym"].items() if not n.startswith("LBB")}
            for slot, text in us["src"].items():
                if slot in funcs:      # BTF: the declaration; DWARF: the '{' line
                    assert theirs["src"].get(slot) in (["{"], text), (where, slot)
                else:
                    assert theirs["src"].get(slot) == text, (where, slot)
                lines += 1
    assert compared > 600 and relocs > 40 and lines > 90, (compared, relocs, lines)


# ---------------------------------------------------------------------------
# what the annotations say

def notes_of(text: str, section: str) -> dict[str, list[str]]:
    """instruction text -> its notes, in one section of a listing."""
    sec = parse_listing(text)[section]
    out: dict[str, list[str]] = {}
    for slot, insn in sec["insn"].items():
        if sec["note"][slot]:
            out.setdefault(insn, []).append(sec["note"][slot])
    return out


def test_relocations_are_named(objects):
    text = disassemble_object(objects["multi"])
    tp = "tracepoint/syscalls/sys_enter_getppid"
    sec = parse_listing(text)
    assert sec[".text"]["sym"] == {0: "bump", 12: "LBB1_2", 21: "LBB1_3", 23: "add_one"}
    assert sec[tp]["sym"] == {0: "first", 45: "second"}     # two programs in one section
    notes = {n for n in sec[tp]["note"].values() if n}
    assert {"call bump", "callback add_one", "map pb", "scale (.rodata.cfg+0)",
            "extra (.data.stats+0)", "kver (.bss+0)", "extern LINUX_KERNEL_VERSION (kconfig)",
            "extern CONFIG_HZ (kconfig)", "extern _stext (ksym)"} <= notes, notes
    assert sec[".text"]["note"][5] == "map counts"
    # a relocated call names its callee, and gets no label from its imm
    calls = notes_of(disassemble_object(objects["calls"]), "socket")
    assert calls == {"call pc-1": ["call sub"], "call pc+3": ["call fib"]}
    # data by its section symbol: the section, the offset and the variable there
    kinds = parse_listing(disassemble_object(objects["kinds"]))
    assert "r2 = 0 ll" in kinds["iter/task"]["insn"].values()
    assert ".rodata+0 (dump_task.___fmt)" in kinds["iter/task"]["note"].values()


def test_core_relocations_name_their_members(objects):
    path = objects["core_read"]
    text = disassemble_object(path)
    sec = parse_listing(text)["tp/sched/sched_process_exec"]
    core = [n for n in sec["note"].values() if n and n.startswith("CO-RE: ")]
    btf = Btf.from_elf(str(path))
    ext = BtfExt.from_elf(str(path), btf)
    relos = ext.core_relos["tp/sched/sched_process_exec"]
    assert len(core) == len(relos)
    for r in relos:
        assert sec["note"][r.insn_off // 8].startswith(f"CO-RE: {r.kind_name} ")
    for expected in ("field_byte_offset struct task_struct.pid",
                     "field_byte_offset struct task_struct.comm[3]",
                     "field_byte_offset struct task_struct.se.vruntime",
                     "field_exists struct task_struct___old.state",
                     "type_exists struct pyebpf_no_such_type",
                     "enumval_value enum pid_type::PIDTYPE_SID",
                     "field_lshift_u64 struct task_struct.sched_reset_on_fork"):
        assert f"CO-RE: {expected}" in core, expected
    # and the source line the relocation came from
    assert "; \tout[0] = BPF_CORE_READ(t, pid);" in text


def test_damaged_btf_loses_only_its_annotations(objects, tmp_path):
    path = objects["core_read"]
    data = bytearray(path.read_bytes())
    btf = ObjElf(bytes(data)).section(".BTF")
    at = bytes(data).find(btf.data)
    data[at:at + 2] = b"\0\0"                   # the magic
    bad = tmp_path / "bad.o"
    bad.write_bytes(bytes(data))
    text = disassemble_object(bad)
    assert text.startswith("# BTF") and "no CO-RE or source annotations" in text
    assert "CO-RE: " not in text and "\n; " not in text
    assert assemble(text).encode() == code_bytes(path)


def test_symbols_that_cannot_be_labels(tmp_path):
    src = tmp_path / "names.c"
    src.write_text(
        '#define SEC(n) __attribute__((section(n), used))\n'
        'SEC("xdp") int lock(void *ctx) { return 1; }\n'
        'SEC("xdp") int r1(void *ctx) { return 2; }\n'
        'SEC("xdp") int map_lookup_elem(void *ctx) { return 3; }\n'
        'SEC("xdp") int fine(void *ctx) { return 4; }\n')
    obj = tmp_path / "names.o"
    subprocess.run([CLANG, "-O2", "-target", "bpf", "-c", str(src), "-o", str(obj)], check=True)
    for annotate in (True, False):
        text = disassemble_object(obj, annotate=annotate)
        for name in ("lock", "r1", "map_lookup_elem"):
            shown = f"<{name}>:" if annotate else f"# {name}:"
            assert f"{shown} (not usable as a label)" in text
        assert ("<fine>:" if annotate else "\nfine:") in text
        assert assemble(text).encode() == code_bytes(obj)


def test_missing_section_and_not_an_object(objects, tmp_path):
    with pytest.raises(ObjectError, match=r"no section 'nope' \(code sections: .*raw_tp"):
        disassemble_object(objects["multi"], "nope")
    text = tmp_path / "x.o"
    text.write_text("not an object")
    with pytest.raises(ObjectError, match="not an ELF file"):
        disassemble_object(text)
    with pytest.raises(ObjectError, match="cannot read"):
        disassemble_object(tmp_path / "missing.o")


# ---------------------------------------------------------------------------
# the command line

def test_cli_lists_an_object_and_its_plain_text_assembles(objects, tmp_path):
    path = objects["multi"]
    r = pyebpf("disasm", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == disassemble_object(path)
    assert pyebpf("disasm", "--elf", str(path)).stdout == r.stdout
    r = pyebpf("disasm", str(path), "--no-annotations")
    assert r.returncode == 0 and r.stdout.decode() == disassemble_object(path, annotate=False)
    listing = tmp_path / "multi.s"
    listing.write_bytes(r.stdout)
    out = tmp_path / "multi.bin"
    r = pyebpf("asm", str(listing), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == code_bytes(path)
    r = pyebpf("disasm", str(path), "--section", "raw_tp/sys_enter", "--style", "verifier")
    assert r.returncode == 0 and "Disassembly of section raw_tp/sys_enter:" in r.stdout.decode()
    assert "call pc-1  # call bump" in r.stdout.decode()
    r = pyebpf("disasm", "-", "--section", "raw_tp/sys_enter", stdin=path.read_bytes())
    assert r.returncode == 0 and "<raw_one>:" in r.stdout.decode()
    r = pyebpf("disasm", str(path), "--section", "nope")
    assert r.returncode == 1 and b"no section 'nope'" in r.stderr
    raw = tmp_path / "raw.bin"
    raw.write_bytes(code_bytes(path))
    r = pyebpf("disasm", str(raw), "--section", "xdp")
    assert r.returncode == 2 and b"--section needs --elf OBJ or an ELF object" in r.stderr


def test_pasted_listing_errors_still_name_the_line(objects):
    """The annotated listing is text for people; edited badly, it is refused
    with the line and column, like any source."""
    text = disassemble_object(objects["multi"]).replace("call pc-1", "call -1", 1)
    with pytest.raises(AssemblyError, match="'call -1' is ambiguous") as info:
        assemble(text, "llvm", "multi.s")
    assert text.splitlines()[info.value.line - 1].endswith("call -1  # call bump")


# ---------------------------------------------------------------------------
# damaged objects

@fuzz_settings(200)
@given(data=st.data())
def test_damaged_objects_give_a_listing_or_an_object_error(objects, data):
    """Bytes of a real object, flipped or cut: a listing or a PyebpfError, never a crash."""
    name = data.draw(st.sampled_from(["multi", "core_read", "execsnoop"]))
    raw = bytearray(objects[name].read_bytes())
    # anywhere, or inside what the annotations read
    region = data.draw(st.sampled_from([None, ".BTF", ".BTF.ext", ".symtab", ".rel.text"]))
    sec = ObjElf(bytes(raw)).section(region) if region else None
    start = bytes(raw).find(sec.data) if sec is not None and sec.data else 0
    size = len(sec.data) if sec is not None and sec.data else len(raw)
    for _ in range(data.draw(st.integers(1, 8))):
        at = start + data.draw(st.integers(0, size - 1))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    try:
        text = disassemble_object(name, data=bytes(raw),
                                  annotate=data.draw(st.booleans()))
    except PyebpfError:
        return
    assert isinstance(text, str)


LLVM_MC = shutil.which("llvm-mc") or shutil.which("llvm-mc-14")


@pytest.mark.skipif(LLVM_MC is None, reason="llvm-mc builds an object with chosen symbols")
def test_symbols_at_one_slot_and_targets_without_one(tmp_path):
    """Two labels at one slot: the one llvm-objdump 14 prints (the last by
    name); a target without a symbol: a synthetic label (llvm: <x2+0x8>)."""
    src = tmp_path / "two.s"
    src.write_text("\t.text\n\t.globl f\n\t.type f,@function\nf:\n\tr0 = 0\n"
                   "\tif r0 == 0 goto x1\n\tgoto +1\nx2:\nx1:\n\tr0 = 1\n\texit\n")
    obj = tmp_path / "two.o"
    subprocess.run([LLVM_MC, "-triple", "bpf", "-filetype=obj", str(src), "-o", str(obj)],
                   check=True)
    ours = parse_listing(disassemble_object(obj))[".text"]
    llvm = parse_listing(objdump(obj))[".text"]
    assert ours["sym"] == {0: "f", 3: "x2", 4: "L4"}
    assert llvm["sym"] == {0: "f", 3: "x2"}
    assert ours["insn"][1] == "if r0 == 0 goto x2" and llvm["insn"][1] == "if r0 == 0 goto +1 <x2>"
    assert ours["insn"][2] == "goto L4" and llvm["insn"][2] == "goto +1 <x2+0x8>"
    assert assemble(disassemble_object(obj)).encode() == code_bytes(obj)


def test_kfunc_calls_are_named(objects):
    out = objects["multi"].parent        # (where vmlinux.h is)
    src = out / "kfunc.bpf.c"
    src.write_text('#include "vmlinux.h"\n#include <bpf/bpf_helpers.h>\n'
                   'extern void bpf_rcu_read_lock(void) __ksym;\n'
                   'extern void bpf_rcu_read_unlock(void) __ksym;\n'
                   'SEC("tp_btf/sched_switch") int kf(void *ctx)\n'
                   '{\n\tbpf_rcu_read_lock();\n\tbpf_rcu_read_unlock();\n\treturn 0;\n}\n'
                   'char LICENSE[] SEC("license") = "GPL";\n')
    obj = out / "kfunc.bpf.o"
    subprocess.run([CLANG, "-O2", "-g", "-target", "bpf", "-I", str(out), "-c", str(src), "-o",
                    str(obj)], check=True)
    sec = parse_listing(disassemble_object(obj))["tp_btf/sched_switch"]
    assert sec["insn"][0] == sec["insn"][1] == "call pc-1"
    assert (sec["note"][0], sec["note"][1]) == ("kfunc bpf_rcu_read_lock",
                                                "kfunc bpf_rcu_read_unlock")
    assert sec["src"][0] == ["bpf_rcu_read_lock();"]
