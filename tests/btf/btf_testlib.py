"""Helpers of the BTF tests: bpftool's raw dump written from pyebpf's types
(to compare with ``bpftool btf dump ... format raw`` line by line), and the
build of the C test objects with Debian's clang against a vmlinux.h made by
bpftool from the running kernel's BTF."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

from pyebpf.btf import Btf, Kind
from pyebpf.btf.types import INT_BOOL, INT_CHAR, INT_SIGNED, LINKAGE, kind_name

HERE = pathlib.Path(__file__).resolve().parent
CLANG = shutil.which("clang") or shutil.which("clang-14")
BPFTOOL = shutil.which("bpftool")
VMLINUX = "/sys/kernel/btf/vmlinux"
_FUNC_LINKAGE = {0: "static", 1: "global", 2: "extern"}


def _n(name: str) -> str:
    return f"'{name or '(anon)'}'"


def raw_lines(btf: Btf, type_id: int) -> list[str]:
    """One type as ``bpftool btf dump ... format raw`` prints it."""
    t = btf[type_id]
    k = t.kind
    head = f"[{type_id}] {kind_name(k)} {_n(t.name)}"
    if k == Kind.INT:
        enc = t.encoding
        names = [n for bit, n in ((INT_SIGNED, "SIGNED"), (INT_CHAR, "CHAR"), (INT_BOOL, "BOOL"))
                 if enc & bit]
        text = "(none)" if not enc else names[0] if len(names) == 1 else "UNKN"
        return [f"{head} size={t.size} bits_offset={t.bit_offset} nr_bits={t.bits} "
                f"encoding={text}"]
    if k in (Kind.PTR, Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG):
        return [f"{head} type_id={t.ref}"]
    if k == Kind.ARRAY:
        return [f"{head} type_id={t.elem} index_type_id={t.index} nr_elems={t.nelems}"]
    if k in (Kind.STRUCT, Kind.UNION):
        out = [f"{head} size={t.size} vlen={len(t.members)}"]
        for m in t.members:
            line = f"\t{_n(m.name)} type_id={m.type} bits_offset={m.bit_offset}"
            if m.bitfield_size:
                line += f" bitfield_size={m.bitfield_size}"
            out.append(line)
        return out
    if k in (Kind.ENUM, Kind.ENUM64):
        sign = "SIGNED" if t.kind_flag else "UNSIGNED"
        out = [f"{head} encoding={sign} size={t.size} vlen={len(t.values)}"]
        suffix = ("LL" if t.kind_flag else "ULL") if k == Kind.ENUM64 else ""
        out += [f"\t{_n(v.name)} val={v.value}{suffix}" for v in t.values]
        return out
    if k == Kind.FWD:
        return [f"{head} fwd_kind={'union' if t.kind_flag else 'struct'}"]
    if k == Kind.FUNC:
        return [f"{head} type_id={t.ref} linkage={_FUNC_LINKAGE.get(t.linkage, '(unknown)')}"]
    if k == Kind.FUNC_PROTO:
        out = [f"{head} ret_type_id={t.ref} vlen={len(t.params)}"]
        out += [f"\t{_n(p.name)} type_id={p.type}" for p in t.params]
        return out
    if k == Kind.VAR:
        return [f"{head} type_id={t.ref}, linkage={LINKAGE.get(t.linkage, '(unknown)')}"]
    if k == Kind.DATASEC:
        out = [f"{head} size={t.size} vlen={len(t.secinfo)}"]
        for e in t.secinfo:
            v = btf[e.type]
            out.append(f"\ttype_id={e.type} offset={e.offset} size={e.size} "
                       f"({kind_name(v.kind)} {_n(v.name)})")
        return out
    if k == Kind.FLOAT:
        return [f"{head} size={t.size}"]
    if k == Kind.DECL_TAG:
        return [f"{head} type_id={t.ref} component_idx={t.component_idx}"]
    raise AssertionError(f"kind {k}")


def raw_dump(btf: Btf) -> list[str]:
    """Every own type of ``btf`` as bpftool's raw dump lines."""
    out: list[str] = []
    for tid in btf.ids():
        out += raw_lines(btf, tid)
    return out


def bpftool_raw(path: str, base: str | None = None) -> list[str]:
    """``bpftool btf dump file PATH format raw`` (``-B base`` for split BTF)."""
    cmd = [BPFTOOL] + (["-B", base] if base else []) + ["btf", "dump", "file", path,
                                                          "format", "raw"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return res.stdout.splitlines()


def make_vmlinux_h(outdir: pathlib.Path) -> pathlib.Path:
    """``vmlinux.h`` of the running kernel, written by bpftool."""
    path = outdir / "vmlinux.h"
    with open(path, "w") as f:
        subprocess.run([BPFTOOL, "btf", "dump", "file", VMLINUX, "format", "c"], stdout=f,
                       check=True)
    return path


def compile_bpf(src: pathlib.Path, outdir: pathlib.Path) -> pathlib.Path:
    """``clang -O2 -g -target bpf -c`` of a test program (vmlinux.h in ``outdir``)."""
    obj = outdir / (src.name.removesuffix(".c") + ".o")
    subprocess.run([CLANG, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86",
                    "-I", str(outdir), "-c", str(src), "-o", str(obj)],
                   check=True, capture_output=True)
    return obj
