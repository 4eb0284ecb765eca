"""pyebpf.elf: symbols, versions, address <-> offset, boundaries, libraries (no kernel).

Ground truth comes from binutils (nm, objdump, readelf) when installed, and
from binaries gcc builds for the test.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pyebpf import elf
from pyebpf.elf import (AmbiguousSymbolError, ElfError, InstructionBoundaryError,
                        LibraryNotFoundError, SymbolNotFoundError, open_elf, parse_location)
from waiting import read_line

LIBC = elf.resolve_library("libc")
needs_binutils = pytest.mark.skipif(shutil.which("nm") is None or shutil.which("objdump") is None,
                                    reason="binutils (nm, objdump) not installed")


def nm(path: str, *args: str) -> list[tuple[int, str, str]]:
    out = subprocess.run(["nm", "--defined-only", *args, path], capture_output=True,
                         text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            rows.append((int(parts[0], 16), parts[1], parts[2]))
    return rows


def objdump_starts(path: str, func: str) -> list[int]:
    """Instruction addresses of ``func`` as objdump decodes them."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                         text=True, check=True).stdout
    starts, inside = [], False
    for line in out.splitlines():
        if re.match(r"^[0-9a-f]+ <.*>:$", line):
            inside = line.endswith(f"<{func}>:")
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s", line)
        if inside and m:
            starts.append(int(m.group(1), 16))
    return starts


# ------------------------------------------------------------------ symbols
@needs_binutils
@pytest.mark.parametrize("variant", ["pie", "nopie", "moved"])
def test_symbols_match_nm(variant, request):
    path = request.getfixturevalue(f"target_{variant}")
    ef = open_elf(path)
    ours = {(s.address, s.name) for s in ef.symbols()} | \
        {(s.address, s.versioned_name) for s in ef.symbols()}     # copy-relocated stdout@GLIBC_2.2.5
    theirs = {(a, n) for a, t, n in nm(path) if t in "TtWwDdBbRr"}
    assert theirs <= ours
    funcs = {(s.address, s.name) for s in ef.symbols() if s.is_function}
    assert {(a, n) for a, t, n in nm(path) if t in "Tt"} <= funcs
    for name in ("target_add", "target_mul", "main"):
        (addr,) = [a for a, t, n in nm(path) if n == name]
        assert ef.symbol(name).address == addr


@needs_binutils
def test_libc_versions_match_nm():
    ef = open_elf(LIBC)
    theirs = {(a, n) for a, t, n in nm(LIBC, "-D", "--with-symbol-versions") if t in "TWi"}
    ours = {(s.address, s.versioned_name) for s in ef.symbols()
            if s.table == ".dynsym" and s.is_function}
    assert theirs == ours


def test_versioned_names():
    ef = open_elf(LIBC)
    default = ef.resolve("malloc")
    assert default.symbol.default and default.symbol.version.startswith("GLIBC_")
    assert ef.resolve(f"malloc@@{default.symbol.version}").file_offset == default.file_offset
    assert ef.resolve(f"malloc@{default.symbol.version}").file_offset == default.file_offset
    # realpath has an old hidden version and a new default one (glibc x86-64)
    versions = {s.versioned_name: s for s in ef.find_symbols("realpath@GLIBC_2.2.5")}
    if "realpath@GLIBC_2.2.5" in versions:
        old = ef.resolve("realpath@GLIBC_2.2.5")
        new = ef.resolve("realpath")
        assert old.symbol.default is False and new.symbol.default is True
        assert old.file_offset != new.file_offset
        assert ef.resolve("realpath@@" + new.symbol.version).file_offset == new.file_offset
        with pytest.raises(SymbolNotFoundError, match="has no version"):
            ef.resolve("realpath@@GLIBC_2.2.5")      # exists, but not as default


def test_symbol_plus_offset_and_address(target_nopie):
    ef = open_elf(target_nopie)
    sym = ef.symbol("target_add")
    starts = ef.instruction_boundaries(sym)
    loc = ef.resolve(f"target_add+{starts[1]:#x}")
    assert loc.symbol == sym and loc.symbol_offset == starts[1]
    assert loc.address == sym.address + starts[1]
    assert loc.file_offset == ef.address_to_offset(loc.address)
    by_addr = ef.resolve(hex(loc.address))
    assert (by_addr.file_offset, by_addr.symbol, by_addr.symbol_offset) == \
        (loc.file_offset, sym, starts[1])
    assert ef.resolve(loc.address).file_offset == loc.file_offset   # an int = address here
    assert ef.location_at_offset(loc.file_offset).symbol_offset == starts[1]


def test_wrong_symbol_lists_close_matches(target_pie):
    ef = open_elf(target_pie)
    with pytest.raises(SymbolNotFoundError) as info:
        ef.resolve("target_ad")
    err = info.value
    assert "target_add" in err.close_matches and "target_add" in str(err)
    assert err.symbol_count == len({s.name for s in ef.symbols()})
    assert f"{err.symbol_count} symbol names" in str(err)
    with pytest.raises(SymbolNotFoundError, match="malloc"):
        open_elf(LIBC).resolve("maloc")
    with pytest.raises(LookupError):            # the built-in base class works too
        ef.resolve("no_such_function_at_all")


def test_data_symbol_and_ifunc_refused(target_pie):
    ef = open_elf(target_pie)
    with pytest.raises(ElfError, match="not a function"):
        ef.resolve("target_semaphore")
    libc = open_elf(LIBC)
    ifuncs = [s for s in libc.symbols() if s.type == elf.STT_GNU_IFUNC and s.default]
    if ifuncs:
        with pytest.raises(ElfError, match="IFUNC"):
            libc.resolve(ifuncs[0].name)


def test_ambiguous_local_symbols(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    a = tmp_path / "a.c"
    b = tmp_path / "b.c"
    a.write_text("static int helper(int x) { return x + 1; }\n"
                 "int use_a(int x) { return helper(x); }\n")
    b.write_text("static int helper(int x) { return x * 3; }\n"
                 "int use_b(int x) { return helper(x); }\n"
                 "int use_a(int); int main(void) { return use_a(1) + use_b(2); }\n")
    out = tmp_path / "amb"
    subprocess.run(["gcc", "-O0", "-o", str(out), str(a), str(b)], check=True)
    ef = open_elf(str(out))
    with pytest.raises(AmbiguousSymbolError) as info:
        ef.resolve("helper")
    assert len(info.value.candidates) == 2
    assert "helper" in str(info.value) and "0x" in str(info.value)
    # an address picks one of them
    addr = info.value.candidates[0].address
    assert ef.resolve(hex(addr)).symbol.name == "helper"


# ------------------------------------------------------ address <-> offset
@needs_binutils
@pytest.mark.parametrize("variant", ["pie", "nopie", "moved"])
def test_file_offset_reads_the_function_bytes(variant, request):
    """The file offset points at the bytes objdump shows at the address."""
    path = request.getfixturevalue(f"target_{variant}")
    ef = open_elf(path)
    sym = ef.symbol("target_add")
    off = ef.address_to_offset(sym.address)
    with open(path, "rb") as f:
        f.seek(off)
        code = f.read(sym.size)
    out = subprocess.run(["objdump", "-d", f"--start-address={sym.address:#x}",
                          f"--stop-address={sym.address + sym.size:#x}", path],
                         capture_output=True, text=True, check=True).stdout
    hexbytes = "".join(re.findall(r"^\s+[0-9a-f]+:\t((?:[0-9a-f]{2} )+)", out, re.M)).replace(" ", "")
    assert code.hex() == hexbytes


def test_layouts(target_pie, target_nopie, target_moved):
    pie, nopie, moved = open_elf(target_pie), open_elf(target_nopie), open_elf(target_moved)
    assert pie.is_shared and not nopie.is_shared
    # PIE with GNU ld: address == offset for text; non-PIE: differs by the base
    s = pie.symbol("target_add")
    assert pie.address_to_offset(s.address) == s.address
    s = nopie.symbol("target_add")
    assert nopie.address_to_offset(s.address) == s.address - 0x400000
    # the moved text section sits in a segment whose vaddr-offset differs from all others
    s = moved.symbol("target_add")
    seg = moved.segment_for_address(s.address)
    assert seg.vaddr == 0x10000000 and seg.offset != seg.vaddr
    deltas = {x.vaddr - x.offset for x in moved.segments}
    assert len(deltas) > 1
    assert moved.address_to_offset(s.address) == s.address - seg.vaddr + seg.offset


def test_bss_and_unmapped_addresses(target_nopie):
    ef = open_elf(target_nopie)
    with pytest.raises(ElfError, match="not in any loadable segment"):
        ef.address_to_offset(0x10)
    rw = [s for s in ef.segments if s.memsz > s.filesz]
    if rw:
        with pytest.raises(ElfError, match="bss"):
            ef.address_to_offset(rw[0].vaddr + rw[0].filesz)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_address_offset_roundtrip(data, target_moved):
    ef = open_elf(data.draw(st.sampled_from([target_moved, LIBC])))
    seg = data.draw(st.sampled_from([s for s in ef.segments if s.filesz]))
    vaddr = data.draw(st.integers(seg.vaddr, seg.vaddr + seg.filesz - 1))
    off = ef.address_to_offset(vaddr)
    assert seg.offset <= off < seg.offset + seg.filesz
    assert ef.offset_to_address(off, executable=seg.executable) == vaddr or \
        ef.address_to_offset(ef.offset_to_address(off)) == off


# -------------------------------------------------------- address -> symbol
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_symbolize_inverts_symbols(data):
    ef = open_elf(LIBC)
    funcs = [s for s in ef.symbols() if s.is_function and s.size]
    sym = data.draw(st.sampled_from(funcs))
    delta = data.draw(st.integers(0, sym.size - 1))
    hit, off = ef.symbolize(sym.address + delta)
    # an alias, or a symbol nested inside this one, is a correct answer too
    assert hit.address <= sym.address + delta < hit.address + max(hit.size, 1)
    assert off == sym.address + delta - hit.address
    if hit.address == sym.address:
        assert off == delta


def test_symbolize_outside(target_nopie):
    ef = open_elf(target_nopie)
    assert ef.symbolize(0x10) is None
    s = ef.symbol("target_mul")
    assert ef.symbolize(s.address + 3) == (s, 3)


# ---------------------------------------------------- instruction boundary
@needs_binutils
@pytest.mark.parametrize("func", ["target_add", "target_mul", "main"])
def test_boundaries_match_objdump(func, target_nopie):
    ef = open_elf(target_nopie)
    sym = ef.symbol(func)
    assert [sym.address + o for o in ef.instruction_boundaries(sym)] == \
        objdump_starts(target_nopie, func)


def test_mid_instruction_refused(target_pie):
    ef = open_elf(target_pie)
    sym = ef.symbol("target_add")
    starts = ef.instruction_boundaries(sym)
    gaps = [o for a, b in zip(starts, starts[1:]) for o in range(a + 1, b)]
    assert gaps, "target_add has only one-byte instructions?"
    with pytest.raises(InstructionBoundaryError) as info:
        ef.resolve(f"target_add+{gaps[0]:#x}")
    msg = str(info.value)
    assert "middle of the instruction" in msg and f"+{gaps[0]:#x}" in msg
    assert set(info.value.boundaries) <= set(starts)
    with pytest.raises(InstructionBoundaryError, match="past the end"):
        ef.resolve(f"target_add+{sym.size + 4:#x}")
    # the check can be turned off
    assert ef.resolve(f"target_add+{gaps[0]:#x}", check_boundary=False).symbol_offset == gaps[0]
    # raw addresses are checked too
    with pytest.raises(InstructionBoundaryError):
        ef.resolve(hex(sym.address + gaps[0]))


# ------------------------------------------------------------- spec parsing
def test_parse_location_forms():
    assert parse_location("malloc") == ("malloc", None, False, 0, None)
    assert parse_location("malloc+0x10") == ("malloc", None, False, 16, None)
    assert parse_location("malloc+8") == ("malloc", None, False, 8, None)
    assert parse_location("malloc@@GLIBC_2.2.5") == ("malloc", "GLIBC_2.2.5", True, 0, None)
    assert parse_location("malloc@GLIBC_2.2.5+4") == ("malloc", "GLIBC_2.2.5", False, 4, None)
    assert parse_location("0x401136") == (None, None, False, 0, 0x401136)
    assert parse_location(4096) == (None, None, False, 0, 4096)
    assert parse_location("_ZN3foo3barEv") == ("_ZN3foo3barEv", None, False, 0, None)
    for bad in ("", "@@VER", "name@"):
        with pytest.raises(ElfError):
            parse_location(bad)


_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.$]{0,30}", fullmatch=True)


@given(name=_ident, version=st.none() | st.from_regex(r"[A-Z][A-Z0-9_.]{0,12}", fullmatch=True),
       default=st.booleans(), off=st.integers(0, 1 << 20), hexa=st.booleans())
def test_parse_location_roundtrip(name, version, default, off, hexa):
    text = name
    if version:
        text += ("@@" if default else "@") + version
    if off:
        text += "+" + (hex(off) if hexa else str(off))
    spec = parse_location(text)
    if re.fullmatch(r"0[xX][0-9a-fA-F]+|[0-9]+", text):
        assert spec.address == int(text, 0)
        return
    assert (spec.name, spec.version, spec.offset) == (name, version, off)
    assert spec.default_only == bool(version and default)


# ----------------------------------------------------------------- caching
def test_cache_per_file(target_pie, tmp_path):
    assert open_elf(target_pie) is open_elf(target_pie)
    link = tmp_path / "link"
    link.symlink_to(target_pie)
    assert open_elf(str(link)) is open_elf(target_pie)        # same inode, same entry
    copy = tmp_path / "copy"
    shutil.copy(target_pie, copy)
    first = open_elf(str(copy))
    st_ = os.stat(copy)
    os.utime(copy, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    assert open_elf(str(copy)) is not first                  # changed mtime: parsed again


def test_not_elf(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hello")
    with pytest.raises(ElfError, match="not an ELF"):
        open_elf(str(p))
    with pytest.raises(FileNotFoundError):
        open_elf(str(tmp_path / "missing"))


def test_stripped_binary(tmp_path, target_nopie):
    if shutil.which("strip") is None:
        pytest.skip("strip not installed")
    out = tmp_path / "stripped"
    subprocess.run(["strip", "-s", "-o", str(out), target_nopie], check=True)
    ef = open_elf(str(out))
    with pytest.raises(SymbolNotFoundError):
        ef.resolve("target_add")
    # still usable by address
    addr = open_elf(target_nopie).symbol("target_add").address
    assert ef.resolve(hex(addr)).file_offset == open_elf(target_nopie).address_to_offset(addr)


def test_build_id(target_pie):
    bid = open_elf(target_pie).build_id
    if shutil.which("readelf"):
        out = subprocess.run(["readelf", "-n", target_pie], capture_output=True, text=True).stdout
        m = re.search(r"Build ID: ([0-9a-f]+)", out)
        if m:
            assert bid.hex() == m.group(1)


# ---------------------------------------------------------------- libraries
def test_ld_so_cache_parses():
    entries = elf.ld_so_cache()
    if not entries:
        pytest.skip("no /etc/ld.so.cache")
    names = {e[0] for e in entries}
    assert "libc.so.6" in names
    if shutil.which("ldconfig") or os.path.exists("/sbin/ldconfig"):
        ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
        theirs = set(re.findall(r"^\s+(\S+) \(.*\) => (\S+)$", out, re.M))
        assert theirs == {(n, p) for n, _f, p in entries}


def test_resolve_library_names():
    libc = elf.resolve_library("libc")
    assert os.path.basename(libc) == "libc.so.6"
    assert open_elf(libc).symbol("malloc")
    assert os.path.samefile(elf.resolve_library("libc.so.6"), libc)
    assert os.path.samefile(elf.resolve_library("c"), libc)
    # the 64-bit one, not /lib32's
    ident = open(libc, "rb").read(20)
    assert ident[4] == 2                    # ELFCLASS64
    assert elf.resolve_library("/bin/sh") == "/bin/sh"
    sh = elf.resolve_library("sh")
    assert os.path.basename(sh) == "sh"
    with pytest.raises(LibraryNotFoundError) as info:
        elf.resolve_library("libcc_nonexistent")
    assert "give the full path" in str(info.value)
    with pytest.raises(FileNotFoundError):
        elf.resolve_library("/no/such/file")


def test_resolve_library_from_process(target_pie, spawn):
    t = spawn(target_pie)
    path = elf.resolve_library("libc", pid=t.pid)
    mods = elf.process_modules(t.pid)
    assert mods[0].path == target_pie               # the executable first
    assert any(m.path == path or m.open_path == path for m in mods)
    assert os.path.basename(path).startswith("libc.so")


def test_process_modules_addresses(target_pie, spawn):
    t = spawn(target_pie)
    exe = elf.process_modules(t.pid)[0]
    ef = open_elf(exe.open_path)
    sym = ef.symbol("target_add")
    runtime = exe.runtime_address(sym.address)
    assert exe.contains(runtime)
    assert exe.elf_address(runtime) == sym.address
    assert ef.symbolize(exe.elf_address(runtime + 4)) == (sym, 4)
    with pytest.raises(ProcessLookupError):
        elf.process_maps(2 ** 22 + 12345)


def test_process_in_other_mount_namespace(tmp_path):
    """A process whose files are not reachable from our root (a container): its
    modules are opened through /proc/PID/root."""
    unshare, gcc = shutil.which("unshare"), shutil.which("gcc")
    if unshare is None or gcc is None or os.geteuid() != 0:
        pytest.skip("needs unshare(1), gcc and root")
    from .conftest import TARGET_C
    static = tmp_path / "target_static"
    r = subprocess.run([gcc, "-O0", "-static", "-o", str(static), str(TARGET_C)],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"gcc -static failed (libc6-dev has libc.a):\n{r.stderr[-400:]}"
    root = tmp_path / "root"
    root.mkdir()
    # a tmpfs mounted only in the child's mount namespace, holding the binary
    script = (f"mount -t tmpfs none {root} && cp {static} {root}/ctr_target && "
              f"exec chroot {root} /ctr_target")
    proc = subprocess.Popen([unshare, "-m", "--propagation", "private", "sh", "-c", script],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = read_line(proc.stdout, "the target in its mount namespace to start").split()
        assert line and line[0] == "ready", \
            f"could not start a process in a new mount namespace: {line}"
        pid = int(line[1])
        mods = elf.process_modules(pid)
        exe = mods[0]
        # maps shows a path that does not lead to the file from our root
        assert exe.path.endswith("/ctr_target")
        assert not os.path.exists(exe.path)
        assert exe.open_path.startswith(f"/proc/{pid}/")
        assert os.path.samefile(exe.open_path, f"/proc/{pid}/exe")
        ef = open_elf(exe.open_path)
        assert ef.symbol("target_add")
        assert elf.resolve_library("ctr_target", pid=pid) == exe.open_path
    finally:
        proc.stdin.close()
        proc.wait(5)
        proc.stdout.close()
