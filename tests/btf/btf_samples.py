"""A BTF blob with every kind, built with :class:`pyebpf.btf.BtfBuilder`
(shared by the writer tests and the fuzzer's corpus)."""
from __future__ import annotations

from pyebpf.btf import BtfBuilder


def every_kind() -> BtfBuilder:
    """Types of every BTF kind, valid for the kernel's BPF_BTF_LOAD."""
    b = BtfBuilder()
    u32 = b.add_int("unsigned int", 4)                       # 1
    s64 = b.add_int("long long", 8, signed=True)             # 2
    ch = b.add_int("char", 1, char=True)                     # 3
    bl = b.add_int("_Bool", 1, bool_=True)                   # 4
    arr = b.add_array(ch, 16, index=u32)                     # 5
    fwd = b.add_fwd("later")                                 # 6
    fptr = b.add_ptr(fwd)                                    # 7
    cst = b.add_const(ch)                                    # 8
    vol = b.add_volatile(u32)                                # 9
    cptr = b.add_ptr(cst)                                    # 10
    rst = b.add_restrict(cptr)                               # 11
    tdef = b.add_typedef("u32_t", u32)                       # 12
    enum = b.add_enum("colour", [("RED", 0), ("GREEN", 1), ("NEG", -2)])  # 13
    e64 = b.add_enum("big", [("SMALL", 1), ("HUGE", 1 << 40)], size=8)  # 14
    flt = b.add_float("double", 8)                           # 15
    inner = b.add_union("", 8, [("i", s64, 0), ("u", u32, 0)])         # 16
    st = b.add_struct("sample", 48, [("a", u32, 0), ("flag", u32, 32, 1), ("bits", u32, 33, 7),
                                     ("name", arr, 64), ("", inner, 192), ("next", fptr, 256),
                                     ("v", vol, 320), ("b", bl, 352)])  # 17
    proto = b.add_func_proto(s64, [("s", b.add_ptr(st)), ("t", tdef)])  # 18 ptr, 19 proto
    func = b.add_func("handle", proto, linkage=1)            # 20
    var = b.add_var("counter", u32, linkage=1)               # 21
    b.add_datasec(".data", 4, [(var, 0, 4)])                 # 22
    b.add_decl_tag("kfunc", func, -1)                        # 23
    b.add_decl_tag("arg", func, 0)                           # 24
    tag = b.add_type_tag("user", u32)                        # 25
    b.add_ptr(tag)                                           # 26
    b.add_typedef("rptr", rst)                               # 27
    b.add_typedef("colour_t", enum)                          # 28
    b.add_typedef("big_t", e64)                              # 29
    b.add_typedef("dbl", flt)                                # 30
    b.add_func_proto(0, [("fmt", cptr), ("", 0)])           # 31: variadic
    return b
