"""Property tests of the argument-spec parser (hypothesis).

* specs written from random valid parts parse to the record those parts
  describe, and ``parse_arg(spec.format()) == spec``;
* random strings, on every architecture, only ever raise UsdtSpecError;
* ``parse_args`` never raises and keeps one entry per token.
"""
from __future__ import annotations

from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.errors import UsdtSpecError
from pyebpf.usdt import SUPPORTED_ARCHES, ArgKind, parse_arg, parse_args, split_args
from pyebpf.usdt.spec import _X86_R32, _X86_R64

K = ArgKind

sizes = st.sampled_from([1, 2, 4, 8])
disp32 = st.integers(-2**31, 2**31 - 1)
imm64 = st.integers(-2**63, 2**64 - 1)
symbols = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,16}|\.L[A-Za-z0-9_]{1,8}", fullmatch=True)


@st.composite
def size_prefix(draw):
    fl = draw(st.booleans())
    size = draw(st.sampled_from([2, 4, 8] if fl else [1, 2, 4, 8]))
    signed = False if fl else draw(st.booleans())
    return size, signed, fl, f"{'-' if signed else ''}{size}{'f' if fl else ''}@"


def _num(v: int, draw) -> str:
    style = draw(st.sampled_from(["dec", "hex"]))
    if style == "hex":
        return ("-" if v < 0 else "") + hex(abs(v))
    return str(v)


X86_REGS = sorted(k for k in _X86_R64 if not k.endswith("l") or k in {
    "al", "bl", "cl", "dl", "sil", "dil", "bpl", "spl"})
X86_ADDR_REGS = sorted(k for k, (full, w, sh) in _X86_R64.items()
                       if w in (4, 8) and not full.startswith("xmm") and full != "rip"
                       and k in X86_REGS)
X86_INDEX_REGS = [r for r in X86_ADDR_REGS if _X86_R64[r][0] != "rsp"]


@st.composite
def x86_spec(draw):
    """(text, expected fields) for a random valid x86_64 spec."""
    size, signed, fl, prefix = draw(size_prefix())
    kind = draw(st.sampled_from(list(K)))
    want = dict(size=size, signed=signed, is_float=fl, kind=kind)
    if kind is K.CONST:
        v = draw(imm64)
        op = "$" + _num(v, draw)
        want.update(imm=v)
    elif kind is K.ADDRESS:
        sym, off = draw(symbols), draw(disp32)
        op = f"${sym}" + (f"+{off}" if off > 0 else f"{off}" if off < 0 else "")
        want.update(symbol=sym, offset=off)
    elif kind is K.REG:
        name = draw(st.sampled_from(X86_REGS))
        full, w, sh = _X86_R64[name]
        op = f"%{name}"
        want.update(reg=full, reg_width=w, reg_shift=sh)
    elif kind is K.ABSOLUTE:
        sym = draw(st.none() | symbols)
        off = draw(disp32)
        op = (sym + (f"+{off}" if off > 0 else f"{off}" if off < 0 else "")) if sym else str(off)
        want.update(symbol=sym, offset=off, reg=None)
    else:
        base = draw(st.sampled_from(X86_ADDR_REGS))
        index = draw(st.sampled_from(X86_INDEX_REGS))
        scale = draw(st.sampled_from([1, 2, 4, 8]))
        off = draw(disp32)
        sym = draw(symbols)
        sib = f"%{index}" + (f",{scale}" if scale != 1 or draw(st.booleans()) else "")
        if kind is K.DEREF:
            op = (_num(off, draw) if off or draw(st.booleans()) else "") + f"(%{base})"
            want.update(reg=_X86_R64[base][0], offset=off, index=None, symbol=None)
        elif kind is K.SIB:
            with_base = draw(st.booleans())
            op = (str(off) if off else "") + f"({'%' + base if with_base else ''},{sib})"
            want.update(reg=_X86_R64[base][0] if with_base else None, index=_X86_R64[index][0],
                        scale=scale, offset=off)
        elif kind is K.RIP:
            if draw(st.booleans()):
                op = f"{off}(%rip)"
                want.update(symbol=None)
            else:
                form = draw(st.sampled_from(["sym", "off+sym", "sym+off"]))
                if form == "sym" or off == 0:
                    op = f"{sym}(%rip)"
                    off = 0
                elif form == "off+sym":
                    op = f"{off}+{sym}(%rip)"
                else:
                    op = f"{sym}{'+' if off > 0 else ''}{off}(%rip)"
                want.update(symbol=sym)
            want.update(reg="rip", offset=off)
        elif kind is K.GOTPCREL:
            op = f"{sym}@GOTPCREL(%rip)"
            want.update(symbol=sym, reloc="GOTPCREL", reg="rip")
        elif kind is K.SYM_REG:
            op = f"{sym}(%{base})"
            want.update(symbol=sym, reg=_X86_R64[base][0], index=None)
        else:  # SYM_INDEX
            with_base = draw(st.booleans())
            op = f"{sym}({'%' + base if with_base else ''},{sib})"
            want.update(symbol=sym, index=_X86_R64[index][0], scale=scale,
                        reg=_X86_R64[base][0] if with_base else None)
    return prefix + op, want


@fuzz_settings(400)
@given(x86_spec())
def test_x86_valid_specs_parse_to_their_parts(case):
    text, want = case
    spec = parse_arg(text)
    for key, value in want.items():
        assert getattr(spec, key) == value, (text, key, getattr(spec, key), value)
    assert parse_arg(spec.format()) == spec
    assert parse_arg(parse_arg(spec.format()).format()).format() == spec.format()


@st.composite
def i386_spec(draw):
    size, signed, fl, prefix = draw(size_prefix())
    regs32 = sorted(_X86_R32)
    addr = [r for r, (f, w, s) in _X86_R32.items() if w == 4 and not f.startswith("xmm")
            and f != "eip"]
    choice = draw(st.sampled_from(["reg", "deref", "sib", "const", "abs", "gotoff"]))
    if choice == "reg":
        op = "%" + draw(st.sampled_from(regs32))
    elif choice == "deref":
        op = f"{draw(disp32)}(%{draw(st.sampled_from(addr))})"
    elif choice == "sib":
        op = (f"({'%' + draw(st.sampled_from(addr)) if draw(st.booleans()) else ''},"
              f"%{draw(st.sampled_from([r for r in addr if r != 'esp']))},"
              f"{draw(st.sampled_from([1, 2, 4, 8]))})")
    elif choice == "const":
        op = f"${draw(imm64)}"
    elif choice == "abs":
        op = draw(symbols)
    else:
        op = f"{draw(symbols)}@GOTOFF(%{draw(st.sampled_from(addr))})"
    return prefix + op


@fuzz_settings(400)
@given(i386_spec())
def test_i386_round_trip(text):
    spec = parse_arg(text, "i386")
    assert parse_arg(spec.format(), "i386") == spec


A64_X = [f"x{i}" for i in range(31)] + ["sp"]
A64_W = [f"w{i}" for i in range(31)] + ["wsp"]
A64_V = [f"{p}{i}" for p in "vqdshb" for i in range(32)]


@st.composite
def a64_spec(draw):
    size, signed, fl, prefix = draw(size_prefix())
    choice = draw(st.sampled_from(["reg", "deref", "deref0", "sib", "lo12", "const"]))
    if choice == "reg":
        op = draw(st.sampled_from(A64_X + A64_W + A64_V + ["xzr", "wzr"]))
    elif choice == "deref":
        off = draw(st.integers(-4096, 32760))
        op = f"[{draw(st.sampled_from(A64_X))}, {'#' if draw(st.booleans()) else ''}{off}]"
    elif choice == "deref0":
        op = f"[{draw(st.sampled_from(A64_X))}]"
    elif choice == "sib":
        idx = draw(st.sampled_from(A64_X[:-1] + A64_W[:-1]))
        op = f"[{draw(st.sampled_from(A64_X))}, {idx}"
        if draw(st.booleans()):
            op += f", lsl #{draw(st.integers(0, 3))}"
        op += "]"
    elif choice == "lo12":
        op = f"[{draw(st.sampled_from(A64_X))}, #:lo12:{draw(symbols)}]"
    else:
        op = f"{'#' if draw(st.booleans()) else ''}{draw(imm64)}"
    return prefix + op


@fuzz_settings(400)
@given(a64_spec())
def test_aarch64_round_trip(text):
    spec = parse_arg(text, "aarch64")
    assert parse_arg(spec.format(), "aarch64") == spec


ARM_REGS = [f"r{i}" for i in range(16)] + ["fp", "ip", "sp", "lr", "pc", "sb", "sl"]


@st.composite
def arm_spec(draw):
    size, signed, fl, prefix = draw(size_prefix())
    choice = draw(st.sampled_from(["reg", "freg", "deref", "sib", "const"]))
    if choice == "reg":
        op = draw(st.sampled_from(ARM_REGS))
    elif choice == "freg":
        op = draw(st.sampled_from([f"s{i}" for i in range(32)] + [f"d{i}" for i in range(32)]))
    elif choice == "deref":
        base = draw(st.sampled_from(ARM_REGS))
        off = draw(st.integers(-4095, 4095))
        op = f"[{base}, #{off}]" if draw(st.booleans()) else f"[{base}]"
    elif choice == "sib":
        op = f"[{draw(st.sampled_from(ARM_REGS))}, {draw(st.sampled_from(ARM_REGS))}"
        op += (f", lsl #{draw(st.integers(0, 3))}]" if draw(st.booleans()) else "]")
    else:
        op = f"#{draw(imm64)}"
    return prefix + op


@fuzz_settings(400)
@given(arm_spec())
def test_arm_round_trip(text):
    spec = parse_arg(text, "arm")
    assert parse_arg(spec.format(), "arm") == spec


RV_REGS = ([f"x{i}" for i in range(32)] + ["zero", "ra", "sp", "gp", "tp", "fp"]
           + [f"a{i}" for i in range(8)] + [f"s{i}" for i in range(12)]
           + [f"t{i}" for i in range(7)])
RV_FREGS = [f"f{i}" for i in range(32)] + [f"fa{i}" for i in range(8)]


@st.composite
def rv_spec(draw):
    size, signed, fl, prefix = draw(size_prefix())
    choice = draw(st.sampled_from(["reg", "freg", "deref", "const"]))
    if choice == "reg":
        op = draw(st.sampled_from(RV_REGS))
    elif choice == "freg":
        op = draw(st.sampled_from(RV_FREGS))
    elif choice == "deref":
        op = f"{draw(st.integers(-2048, 2047))}({draw(st.sampled_from(RV_REGS))})"
    else:
        op = str(draw(imm64))
    return prefix + op


@fuzz_settings(400)
@given(rv_spec(), st.sampled_from(["riscv64", "riscv32"]))
def test_riscv_round_trip(text, arch):
    spec = parse_arg(text, arch)
    assert parse_arg(spec.format(), arch) == spec


@st.composite
def s390_spec(draw):
    size, signed, fl, prefix = draw(size_prefix())
    r = st.integers(0, 15)
    choice = draw(st.sampled_from(["reg", "deref", "sib", "const"]))
    if choice == "reg":
        op = f"%{draw(st.sampled_from('rf'))}{draw(r)}"
    elif choice == "deref":
        op = f"{draw(st.integers(-2**19, 2**19))}(%r{draw(r)})"
    elif choice == "sib":
        op = f"{draw(st.integers(0, 4095))}(%r{draw(r)},%r{draw(r)})"
    else:
        op = str(draw(imm64))
    return prefix + op


@fuzz_settings(400)
@given(s390_spec())
def test_s390x_round_trip(text):
    spec = parse_arg(text, "s390x")
    assert parse_arg(spec.format(), "s390x") == spec


@st.composite
def ppc_spec(draw):
    size, signed, fl, prefix = draw(size_prefix())
    r = st.integers(0, 31)
    choice = draw(st.sampled_from(["reg", "bare", "deref", "deref_bare", "const"]))
    if choice == "reg":
        op = f"%r{draw(r)}"
    elif choice == "bare":
        op = str(draw(r))
    elif choice == "deref":
        op = f"{draw(st.integers(-32768, 32767))}(%r{draw(r)})"
    elif choice == "deref_bare":
        op = f"{draw(st.integers(-32768, 32767))}({draw(r)})"
    else:
        op = f"i{draw(imm64)}"
    return prefix + op


@fuzz_settings(400)
@given(ppc_spec())
def test_ppc64_round_trip(text):
    spec = parse_arg(text, "ppc64")
    assert parse_arg(spec.format(), "ppc64") == spec


# ---------------------------------------------------------------------------
# garbage in: only the documented error

SPEC_ALPHABET = st.sampled_from(list("%$@()[],#:+-.0123456789abcdefilnpqrswx_f lLGOTPCREL"))
spec_like = st.text(SPEC_ALPHABET, max_size=30)
any_text = st.text(max_size=40)


@fuzz_settings(400)
@given(st.one_of(spec_like, any_text, st.builds(lambda a, b: a + "@" + b, spec_like, spec_like)),
       st.sampled_from(SUPPORTED_ARCHES))
def test_random_strings_raise_only_usdt_spec_error(text, arch):
    try:
        spec = parse_arg(text, arch)
    except UsdtSpecError as exc:
        assert exc.arch == arch and exc.expected
        return
    # whatever parses must format and parse back to itself
    assert spec.size in (1, 2, 4, 8)
    assert parse_arg(spec.format(), arch) == spec


@fuzz_settings(400)
@given(st.lists(st.one_of(spec_like, x86_spec().map(lambda c: c[0])), max_size=8)
       .map(" ".join))
def test_parse_args_never_raises_and_never_shifts(args):
    out = parse_args(args, "x86_64", probe="p:n")
    tokens = split_args(args)
    assert len(out) == len(tokens)
    for i, (a, tok) in enumerate(zip(out, tokens)):
        assert a.text == tok.strip()
        if not a.decodable:
            assert a.index == i and a.error.index == i and a.error.probe == "p:n"
