"""BTF feature probes: does the kernel's BTF loader take each BTF kind that
some kernels lack (the object loader fixes up its BTF from the answers,
:class:`pyebpf.objects.btfprep.KernelBtf`).  Each is one BPF_BTF_LOAD of a
small blob, asked once a process; :mod:`.features` gives them as Features."""
from __future__ import annotations

import struct

from ..errors import KernelError

__all__ = ["BTF_KINDS", "BTF_FUNC_GLOBAL", "btf_kind_probe", "btf_func_global_probe"]

_ASKED: dict[object, tuple[bool, str]] = {}


#: BTF kinds a probe can ask about: kind number -> (name, the Linux version
#: that brought it)
BTF_KINDS = {15: ("BTF_KIND_DATASEC", "5.2"), 16: ("BTF_KIND_FLOAT", "5.13"),
             17: ("BTF_KIND_DECL_TAG", "5.16"), 18: ("BTF_KIND_TYPE_TAG", "5.17"),
             19: ("BTF_KIND_ENUM64", "6.0")}
#: what :func:`btf_func_global_probe` asks about
BTF_FUNC_GLOBAL = ("global BTF_KIND_FUNC linkage", "5.6")


def _btf_probe(name: str, since: str, types: bytes, strings: bytes) -> tuple[bool, str]:
    """Does the kernel take a BTF blob of ``types`` (after ``[1] int``) and
    ``strings`` (after ``"\\0int\\0"``)?"""
    from .btf import btf_load
    strs = b"\0int\0" + strings
    body = struct.pack("<IIII", 1, 1 << 24, 4, (1 << 24) | 32) + types
    head = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(body), len(body), len(strs))
    try:
        btf_load(head + body + strs, log_level=1, log_size=4096).close()
    except KernelError as exc:
        return False, (f"the kernel refuses {name} (Linux {since}+): "
                       f"{str(exc).splitlines()[0]}")
    return True, f"the kernel takes {name} (Linux {since}+)"


def btf_kind_probe(kind: int) -> tuple[bool, str]:
    """(supported, why): does the kernel's BTF loader take this kind (one of
    :data:`BTF_KINDS`)?  Asked once a process, with a small blob holding one."""
    if kind not in _ASKED:
        _ASKED[kind] = _kind_probe(kind)
    return _ASKED[kind]


def _kind_probe(kind: int) -> tuple[bool, str]:
    name, since = BTF_KINDS.get(kind, ("", ""))
    if kind == 15:       # [2] VAR x int (global), [3] DATASEC .d {[2], 0, 4}
        types = (struct.pack("<IIII", 5, 14 << 24, 1, 1)
                 + struct.pack("<IIIIII", 7, (15 << 24) | 1, 4, 2, 0, 4))
        return _btf_probe(name, since, types, b"x\0.d\0")
    if kind == 16:       # [2] FLOAT f, 4 bytes
        return _btf_probe(name, since, struct.pack("<III", 5, 16 << 24, 4), b"f\0")
    if kind == 17:       # [2] STRUCT s {int a}, [3] DECL_TAG "t" on it
        types = (struct.pack("<IIIIII", 5, (4 << 24) | 1, 4, 7, 1, 0)
                 + struct.pack("<IIII", 9, 17 << 24, 2, 0xFFFFFFFF))
        return _btf_probe(name, since, types, b"s\0a\0t\0")
    if kind == 18:       # [2] TYPE_TAG "t" -> int, [3] PTR -> [2]
        types = struct.pack("<III", 5, 18 << 24, 1) + struct.pack("<III", 0, 2 << 24, 2)
        return _btf_probe(name, since, types, b"t\0")
    if kind == 19:       # [2] ENUM64 e, 8 bytes, {v = 1}
        types = struct.pack("<IIIIII", 5, (19 << 24) | 1, 8, 7, 1, 0)
        return _btf_probe(name, since, types, b"e\0v\0")
    from ..errors import OptionError
    raise OptionError(f"no BTF-kind probe for kind {kind} (kinds: "
                      f"{', '.join(str(k) for k in BTF_KINDS)})")


def btf_func_global_probe() -> tuple[bool, str]:
    """(supported, why): does the kernel's BTF loader take a FUNC of global
    linkage (Linux 5.6+; before, only static)?  Asked once a process."""
    if "func_global" in _ASKED:
        return _ASKED["func_global"]
    # [2] FUNC_PROTO int (int a), [3] FUNC f global
    types = struct.pack("<IIIII", 0, (13 << 24) | 1, 1, 5, 1) + struct.pack("<III", 7,
                                                                           (12 << 24) | 1, 2)
    _ASKED["func_global"] = _btf_probe(*BTF_FUNC_GLOBAL, types, b"a\0f\0")
    return _ASKED["func_global"]
