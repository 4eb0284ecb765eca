"""Argument-spec decoding: every x86_64 form gcc/clang emit, the other
architectures' forms (vectors in the spirit of BCC's test_usdt_args.cc and
libbpf's parsers, plus what clang emits when cross-compiling sys/sdt.h), the
errors, and the never-shift rule."""
from __future__ import annotations

import pytest

from pyebpf.errors import UsdtError, UsdtSpecError
from pyebpf.usdt import (ArgKind, ArgSpec, UndecodableArg, canonical_arch, expected_forms,
                         parse_arg, parse_args, split_args)

K = ArgKind


def check(spec: ArgSpec, **want) -> None:
    for key, value in want.items():
        assert getattr(spec, key) == value, (spec, key, getattr(spec, key), value)
    # the canonical text parses back to the same record
    assert parse_arg(spec.format(), spec.arch) == spec, spec.format()


# ---------------------------------------------------------------------------
# x86_64

X86 = [
    # registers, every sub-register name
    ("8@%rdi", dict(kind=K.REG, size=8, signed=False, reg="rdi", reg_width=8)),
    ("-4@%edi", dict(kind=K.REG, size=4, signed=True, reg="rdi", reg_width=4)),
    ("-1@%dil", dict(kind=K.REG, size=1, signed=True, reg="rdi", reg_width=1)),
    ("2@%cx", dict(kind=K.REG, size=2, reg="rcx", reg_width=2)),
    ("-4@%r8d", dict(kind=K.REG, size=4, reg="r8", reg_width=4)),
    ("2@%r10w", dict(kind=K.REG, size=2, reg="r10", reg_width=2)),
    ("1@%r11b", dict(kind=K.REG, size=1, reg="r11", reg_width=1)),
    ("1@%ah", dict(kind=K.REG, size=1, reg="rax", reg_width=1, reg_shift=8)),
    ("1@%bh", dict(kind=K.REG, reg="rbx", reg_shift=8)),
    ("1@%ch", dict(kind=K.REG, reg="rcx", reg_shift=8)),
    ("1@%dh", dict(kind=K.REG, reg="rdx", reg_shift=8)),
    ("1@%al", dict(kind=K.REG, reg="rax", reg_width=1, reg_shift=0)),
    ("1@%sil", dict(kind=K.REG, reg="rsi", reg_width=1)),
    ("1@%bpl", dict(kind=K.REG, reg="rbp", reg_width=1)),
    ("1@%spl", dict(kind=K.REG, reg="rsp", reg_width=1)),
    ("2@%si", dict(kind=K.REG, reg="rsi", reg_width=2)),
    ("-4@%ebp", dict(kind=K.REG, reg="rbp", reg_width=4)),
    ("8@%r15", dict(kind=K.REG, reg="r15", reg_width=8)),
    ("-4@%r15d", dict(kind=K.REG, reg="r15", reg_width=4)),
    ("8@%RAX", dict(kind=K.REG, reg="rax")),
    # derefs
    ("8@-8(%rbp)", dict(kind=K.DEREF, reg="rbp", offset=-8)),
    ("-4@112(%rsp)", dict(kind=K.DEREF, reg="rsp", offset=112, signed=True)),
    ("8@(%rsp)", dict(kind=K.DEREF, reg="rsp", offset=0)),
    ("4@(%rax)", dict(kind=K.DEREF, reg="rax", offset=0)),
    ("8@0x10(%rdi)", dict(kind=K.DEREF, reg="rdi", offset=16)),
    ("8@1600(%rax)", dict(kind=K.DEREF, offset=1600)),
    # SIB
    ("-8@80(%rsp,%rax,8)", dict(kind=K.SIB, reg="rsp", index="rax", scale=8, offset=80)),
    ("-8@-72(%rsp,%rax,8)", dict(kind=K.SIB, offset=-72)),
    ("1@(%r9,%rsi)", dict(kind=K.SIB, reg="r9", index="rsi", scale=1, offset=0)),
    ("-4@(%r8,%rdi,4)", dict(kind=K.SIB, reg="r8", index="rdi", scale=4)),
    ("8@(%rax,%rdx,8)", dict(kind=K.SIB, reg="rax", index="rdx", scale=8)),
    ("4@(%rbx,%rcx)", dict(kind=K.SIB, reg="rbx", index="rcx", scale=1)),
    ("1@-96(%rbp,%rax,8)", dict(kind=K.SIB, reg="rbp", index="rax", offset=-96)),
    ("-4@(,%rdi,4)", dict(kind=K.SIB, reg=None, index="rdi", scale=4)),
    ("-4@16(,%rdi,4)", dict(kind=K.SIB, reg=None, index="rdi", scale=4, offset=16)),
    ("4@(%rax,%r12d,2)", dict(kind=K.SIB, index="r12", index_width=4, scale=2)),
    # constants: raw value kept, value as size/sign say
    ("-4@$-5", dict(kind=K.CONST, imm=-5, value=-5)),
    ("8@$1234", dict(kind=K.CONST, imm=1234, value=1234)),
    ("2@$-15536", dict(kind=K.CONST, imm=-15536, value=50000)),
    ("1@$-6", dict(kind=K.CONST, imm=-6, value=250)),
    ("4@$-1294967296", dict(kind=K.CONST, imm=-1294967296, value=3000000000)),
    ("8@$-2", dict(kind=K.CONST, imm=-2, value=2**64 - 2)),
    ("-8@$-9223372036854775808", dict(kind=K.CONST, value=-2**63)),
    ("8@$18446744073709551614", dict(kind=K.CONST, imm=2**64 - 2, value=2**64 - 2)),
    ("-8@$18446744073709551614", dict(kind=K.CONST, value=-2)),
    ("4@$0x10", dict(kind=K.CONST, imm=16)),
    ("-4@$-0x10", dict(kind=K.CONST, imm=-16)),
    ("-1@$255", dict(kind=K.CONST, value=-1)),
    ("-4@$0", dict(kind=K.CONST, imm=0, value=0)),
    # rip-relative globals, every spelling
    ("-4@g_counter(%rip)", dict(kind=K.RIP, reg="rip", symbol="g_counter", offset=0)),
    ("-8@16+g_item(%rip)", dict(kind=K.RIP, symbol="g_item", offset=16)),
    ("-8@g_item+16(%rip)", dict(kind=K.RIP, symbol="g_item", offset=16)),
    ("4@glob-2(%rip)", dict(kind=K.RIP, symbol="glob", offset=-2)),
    ("-4@40+CheckpointStats(%rip)", dict(kind=K.RIP, symbol="CheckpointStats", offset=40)),
    ("-4@global_max_action(%rip)", dict(kind=K.RIP, symbol="global_max_action")),
    ("8@24+mp_(%rip)", dict(kind=K.RIP, symbol="mp_", offset=24)),
    ("4f@.LC11(%rip)", dict(kind=K.RIP, symbol=".LC11", is_float=True)),
    ("8f@.LCPI6_0(%rip)", dict(kind=K.RIP, symbol=".LCPI6_0", is_float=True)),
    ("4@s_counter.0(%rip)", dict(kind=K.RIP, symbol="s_counter.0")),
    ("8@_ZN7hotspot5Klass6_layerE(%rip)", dict(kind=K.RIP, symbol="_ZN7hotspot5Klass6_layerE")),
    ("8@16(%rip)", dict(kind=K.RIP, symbol=None, offset=16)),
    ("8@-0x20(%rip)", dict(kind=K.RIP, symbol=None, offset=-32)),
    ("8@g_item@GOTPCREL(%rip)", dict(kind=K.GOTPCREL, symbol="g_item", reloc="GOTPCREL")),
    ("8@g_message@GOTPCREL(%rip)", dict(kind=K.GOTPCREL, symbol="g_message")),
    # symbol + register / index
    ("1@g_bytes(%rsi)", dict(kind=K.SYM_REG, reg="rsi", symbol="g_bytes")),
    ("1@g_bytes+3(%rsi)", dict(kind=K.SYM_REG, symbol="g_bytes", offset=3)),
    ("-4@g_table(,%rdi,4)", dict(kind=K.SYM_INDEX, reg=None, index="rdi", scale=4,
                                 symbol="g_table")),
    ("-8@g_longs(,%rdi,8)", dict(kind=K.SYM_INDEX, index="rdi", scale=8)),
    ("-2@g_shorts(%rsi,%rsi)", dict(kind=K.SYM_INDEX, reg="rsi", index="rsi", scale=1)),
    ("4@8+g_tab(%rax,%rbx,4)", dict(kind=K.SYM_INDEX, reg="rax", index="rbx", offset=8)),
    # absolute / address / segment / TLS
    ("4@g_counter", dict(kind=K.ABSOLUTE, symbol="g_counter", reg=None)),
    ("4@g_counter+4", dict(kind=K.ABSOLUTE, symbol="g_counter", offset=4)),
    ("4@1234", dict(kind=K.ABSOLUTE, symbol=None, offset=1234)),
    ("8@$g_item", dict(kind=K.ADDRESS, symbol="g_item", offset=0)),
    ("8@$g_item+8", dict(kind=K.ADDRESS, symbol="g_item", offset=8)),
    ("-4@%fs:t_tls@tpoff", dict(kind=K.ABSOLUTE, segment="fs", symbol="t_tls", reloc="TPOFF")),
    ("8@%fs:40", dict(kind=K.ABSOLUTE, segment="fs", offset=40)),
    ("8@%gs:8(%rax)", dict(kind=K.DEREF, segment="gs", reg="rax", offset=8)),
    # floats
    ("8f@%xmm1", dict(kind=K.REG, reg="xmm1", reg_width=16, is_float=True, size=8)),
    ("4f@%xmm15", dict(kind=K.REG, reg="xmm15", is_float=True, size=4)),
    ("8f@%rsi", dict(kind=K.REG, reg="rsi", is_float=True)),
    ("4f@%eax", dict(kind=K.REG, reg="rax", reg_width=4, is_float=True)),
    ("8f@40(%rdi)", dict(kind=K.DEREF, reg="rdi", offset=40, is_float=True)),
    ("8f@-32(%rbp)", dict(kind=K.DEREF, is_float=True)),
    ("8f@g_double(%rip)", dict(kind=K.RIP, symbol="g_double", is_float=True)),
    # size-less (BCC accepts them): size from the register, else the word
    ("%rdi", dict(kind=K.REG, reg="rdi", size=8, size_given=False, signed=False)),
    ("%eax", dict(kind=K.REG, reg="rax", size=4, size_given=False)),
    ("%al", dict(kind=K.REG, reg="rax", size=1, size_given=False)),
    ("$5", dict(kind=K.CONST, imm=5, size=8, size_given=False)),
    ("-8(%rbp)", dict(kind=K.DEREF, reg="rbp", offset=-8, size=8, size_given=False)),
    ("g_x(%rip)", dict(kind=K.RIP, symbol="g_x", size_given=False)),
    ("%xmm0", dict(kind=K.REG, reg="xmm0", size=8, size_given=False)),
]


@pytest.mark.parametrize("text,want", X86, ids=[t for t, _ in X86])
def test_x86_64_forms(text, want):
    spec = parse_arg(text)
    assert spec.arch == "x86_64"
    assert spec.text == text
    check(spec, **want)


def test_x86_sizes_and_signs():
    for size in (1, 2, 4, 8):
        for signed in (False, True):
            text = f"{'-' if signed else ''}{size}@%rax"
            s = parse_arg(text)
            assert (s.size, s.signed, s.is_float) == (size, signed, False)
            assert s.ctype == f"{'s' if signed else 'u'}{8 * size}"
    assert parse_arg("8f@%xmm0").ctype == "f64"
    assert parse_arg("4f@%xmm0").ctype == "f32"


I386 = [
    ("-4@%eax", dict(kind=K.REG, reg="eax", reg_width=4)),
    ("1@%ah", dict(kind=K.REG, reg="eax", reg_shift=8)),
    ("-1@-13(%ebp)", dict(kind=K.DEREF, reg="ebp", offset=-13)),
    ("8@16(%esp)", dict(kind=K.DEREF, reg="esp", offset=16)),
    ("4@(%eax,%edx,4)", dict(kind=K.SIB, reg="eax", index="edx", scale=4)),
    ("8f@.LCPI2_0@GOTOFF(%eax)", dict(kind=K.SYM_REG, symbol=".LCPI2_0", reloc="GOTOFF",
                                      reg="eax", is_float=True)),
    ("-4@g_counter", dict(kind=K.ABSOLUTE, symbol="g_counter")),
    ("-4@$-5", dict(kind=K.CONST, imm=-5)),
    ("-4@%gs:t@ntpoff", dict(kind=K.ABSOLUTE, segment="gs", reloc="NTPOFF")),
    ("%ecx", dict(kind=K.REG, size=4, size_given=False)),
    ("$7", dict(kind=K.CONST, size=4, size_given=False)),
]


@pytest.mark.parametrize("text,want", I386, ids=[t for t, _ in I386])
def test_i386_forms(text, want):
    check(parse_arg(text, "i386"), **want)


def test_i386_rejects_64bit_registers():
    with pytest.raises(UsdtSpecError, match="unknown i386 register %rax"):
        parse_arg("8@%rax", "i386")


def test_x32_uses_64bit_registers():
    check(parse_arg("-4@%r8d", "x32"), reg="r8", reg_width=4)


# ---------------------------------------------------------------------------
# other architectures

AARCH64 = [
    ("-1@x0", dict(kind=K.REG, reg="x0", reg_width=8, signed=True)),
    ("4@5", dict(kind=K.CONST, imm=5)),
    ("-4@-5", dict(kind=K.CONST, imm=-5)),
    ("4@#250", dict(kind=K.CONST, imm=250)),
    ("8@[x12]", dict(kind=K.DEREF, reg="x12", offset=0)),
    ("-4@[x31,-40]", dict(kind=K.DEREF, reg="sp", offset=-40)),
    ("-4@[sp, 128]", dict(kind=K.DEREF, reg="sp", offset=128)),
    ("2@[x22, 20]", dict(kind=K.DEREF, reg="x22", offset=20)),
    ("8@[x0, #16]", dict(kind=K.DEREF, reg="x0", offset=16)),
    ("8@[sp]", dict(kind=K.DEREF, reg="sp")),
    ("8@sp", dict(kind=K.REG, reg="sp")),
    ("-4@w3", dict(kind=K.REG, reg="x3", reg_width=4)),
    ("8@x29", dict(kind=K.REG, reg="x29")),
    ("8@fp", dict(kind=K.REG, reg="x29")),
    ("8@x30", dict(kind=K.REG, reg="x30")),
    ("4@[x1, x2]", dict(kind=K.SIB, reg="x1", index="x2", scale=1)),
    ("8@[x1, x2, lsl #3]", dict(kind=K.SIB, reg="x1", index="x2", scale=8)),
    ("4@[x21, #:lo12:.LANCHOR2]", dict(kind=K.SYM_REG, reg="x21", symbol=".LANCHOR2",
                                       reloc="lo12")),
    ("8@[x1, #:lo12:g_item+8]", dict(kind=K.SYM_REG, symbol="g_item", offset=8)),
    ("-8@v0", dict(kind=K.REG, reg="v0", reg_width=16)),
    ("8f@d1", dict(kind=K.REG, reg="v1", reg_width=8, is_float=True)),
    ("4f@s2", dict(kind=K.REG, reg="v2", reg_width=4, is_float=True)),
    ("8@xzr", dict(kind=K.REG, reg="xzr")),
    ("8f@[x12]", dict(kind=K.DEREF, is_float=True)),
    ("8@x25 -4@[x22]".split()[0], dict(kind=K.REG, reg="x25")),
]


@pytest.mark.parametrize("text,want", AARCH64, ids=[t for t, _ in AARCH64])
def test_aarch64_forms(text, want):
    check(parse_arg(text, "aarch64"), **want)


ARM = [
    ("-1@r0", dict(kind=K.REG, reg="r0")),
    ("4@lr", dict(kind=K.REG, reg="lr")),
    ("4@r14", dict(kind=K.REG, reg="lr")),
    ("4@r11", dict(kind=K.REG, reg="fp")),
    ("4@ip", dict(kind=K.REG, reg="ip")),
    ("-4@#-5", dict(kind=K.CONST, imm=-5)),
    ("-8@#-5000000000", dict(kind=K.CONST, imm=-5000000000)),
    ("4@[r0]", dict(kind=K.DEREF, reg="r0")),
    ("4@[r0, #8]", dict(kind=K.DEREF, reg="r0", offset=8)),
    ("4@[fp, #-8]", dict(kind=K.DEREF, reg="fp", offset=-8)),
    ("4@[sp, #4]", dict(kind=K.DEREF, reg="sp", offset=4)),
    ("4@[r1, r2]", dict(kind=K.SIB, reg="r1", index="r2")),
    ("4@[r1, r2, lsl #2]", dict(kind=K.SIB, reg="r1", index="r2", scale=4)),
    ("8f@d0", dict(kind=K.REG, reg="d0", reg_width=8, is_float=True)),
    ("4f@s1", dict(kind=K.REG, reg="s1", reg_width=4, is_float=True)),
]


@pytest.mark.parametrize("text,want", ARM, ids=[t for t, _ in ARM])
def test_arm_forms(text, want):
    check(parse_arg(text, "arm"), **want)


RISCV = [
    ("8@8(sp)", dict(kind=K.DEREF, reg="sp", offset=8)),
    ("-4@-20(s0)", dict(kind=K.DEREF, reg="s0", offset=-20)),
    ("-4@-20(fp)", dict(kind=K.DEREF, reg="s0", offset=-20)),
    ("8@0(a0)", dict(kind=K.DEREF, reg="a0", offset=0)),
    ("8@(a1)", dict(kind=K.DEREF, reg="a1")),
    ("8@a0", dict(kind=K.REG, reg="a0")),
    ("-1@x10", dict(kind=K.REG, reg="a0")),
    ("8@x2", dict(kind=K.REG, reg="sp")),
    ("-4@-5", dict(kind=K.CONST, imm=-5)),
    ("8f@zero", dict(kind=K.REG, reg="zero")),
    ("8f@fa0", dict(kind=K.REG, reg="fa0", is_float=True)),
    ("4f@f10", dict(kind=K.REG, reg="fa0")),
    ("8@t6", dict(kind=K.REG, reg="t6")),
]


@pytest.mark.parametrize("text,want", RISCV, ids=[t for t, _ in RISCV])
def test_riscv_forms(text, want):
    check(parse_arg(text, "riscv64"), **want)
    assert parse_arg(text, "riscv32").kind == want["kind"]


S390 = [
    ("-1@206(%r11)", dict(kind=K.DEREF, reg="r11", offset=206)),
    ("8@%r2", dict(kind=K.REG, reg="r2")),
    ("-4@-5", dict(kind=K.CONST, imm=-5)),
    ("-8@-5000000000", dict(kind=K.CONST, imm=-5000000000)),
    ("8f@0(%r1)", dict(kind=K.DEREF, reg="r1", offset=0, is_float=True)),
    ("4@8(%r3,%r15)", dict(kind=K.SIB, index="r3", reg="r15", offset=8)),
    ("8f@%f0", dict(kind=K.REG, reg="f0", is_float=True)),
]


@pytest.mark.parametrize("text,want", S390, ids=[t for t, _ in S390])
def test_s390x_forms(text, want):
    check(parse_arg(text, "s390x"), **want)


PPC = [  # BCC's vectors: a bare number is a register, 'i' marks an immediate
    ("-4@0", dict(kind=K.REG, reg="r0")),
    ("8@%r0", dict(kind=K.REG, reg="r0")),
    ("8@i0", dict(kind=K.CONST, imm=0)),
    ("4@0(%r0)", dict(kind=K.DEREF, reg="r0", offset=0)),
    ("-2@0(0)", dict(kind=K.DEREF, reg="r0", offset=0)),
    ("-2@%r3", dict(kind=K.REG, reg="r3")),
    ("-8@i9", dict(kind=K.CONST, imm=9)),
    ("-4@16(6)", dict(kind=K.DEREF, reg="r6", offset=16)),
    ("4@i-67", dict(kind=K.CONST, imm=-67)),
    ("8@-16(%r17)", dict(kind=K.DEREF, reg="r17", offset=-16)),
    ("1@-52(11)", dict(kind=K.DEREF, reg="r11", offset=-52)),
    ("-8@%r25", dict(kind=K.REG, reg="r25")),
    ("-2@-4(31)", dict(kind=K.DEREF, reg="r31", offset=-4)),
    ("8f@3", dict(kind=K.REG, reg="r3", is_float=True)),
]


@pytest.mark.parametrize("text,want", PPC, ids=[t for t, _ in PPC])
def test_ppc64_forms(text, want):
    check(parse_arg(text, "ppc64le"), **want)


def test_arch_aliases():
    assert canonical_arch("amd64") == "x86_64"
    assert canonical_arch("arm64") == "aarch64"
    assert parse_arg("8@x0", "arm64").arch == "aarch64"
    with pytest.raises(UsdtSpecError, match="no USDT argument decoder for architecture"):
        parse_arg("8@$0", "mips64")
    assert "N@%reg" in expected_forms("x86_64")


# ---------------------------------------------------------------------------
# errors

BAD_X86 = [
    ("", "empty"),
    ("16@%rax", "unsupported size 16"),
    ("3@%rax", "unsupported size 3"),
    ("-16@%rax", "unsupported size -16"),
    ("1f@%xmm0", "floating-point size 1"),
    ("8@", "nothing after"),
    ("8@%foo", "unknown x86_64 register %foo"),
    ("8@%xmm40", "unknown x86_64 register"),
    ("8@(%rax,%rbx,3)", "scale must be 1, 2, 4 or 8"),
    ("8@(%rax,%rsp,2)", "cannot be an index"),
    ("8@(%rip,%rax)", "cannot be used with an index"),
    ("8@()", "empty parentheses"),
    ("8@(%rax", "must end with"),
    ("8@%rax)", "unknown"),
    ("8@(%ax)", "cannot be a base"),
    ("8@(%ah)", "cannot be a base"),
    ("8@a+b(%rip)", "two symbols"),
    ("8@-sym(%rip)", "negated symbol"),
    ("8@$", "empty"),
    ("8@$0x", "expected '\\+' or '-'"),
    ("8@$99999999999999999999999", "does not fit in 64 bits"),
    ("8@(%rax,%rbx,4,5)", "more than three"),
    ("8@$%rax", "cannot read"),
    ("x@%rax", "size"),
    ("8@%fs:%rax", "segment override on a register"),
    ("8@$08", "not an integer"),
]


@pytest.mark.parametrize("text,match", BAD_X86, ids=[t or "<empty>" for t, _ in BAD_X86])
def test_x86_errors(text, match):
    with pytest.raises(UsdtSpecError, match=match) as info:
        parse_arg(text)
    err = info.value
    assert isinstance(err, UsdtError) and isinstance(err, ValueError)
    assert err.arch == "x86_64"
    if text:
        assert err.spec == text.strip()
        assert repr(text.strip()) in str(err)
    assert err.expected and "N@%reg" in str(err)     # the message names the expected forms


@pytest.mark.parametrize("arch,text", [
    ("aarch64", "8@[x32, 200]"), ("aarch64", "8@[x0, x1, lsl #9]"), ("aarch64", "8@[d0]"),
    ("aarch64", "8@y0"), ("arm", "4@[r0, #x]"), ("arm", "4@r16"), ("riscv64", "8@8(q0)"),
    ("riscv64", "8@8(fa0)"), ("s390x", "8@%r16"), ("s390x", "8@0(%f0)"), ("ppc64", "8@%r32"),
    ("ppc64", "8@ix"), ("aarch64", "8@[x0, #:lo12:]"), ("arm", "8@[r0, r1, r2, r3]"),
])
def test_other_arch_errors(arch, text):
    with pytest.raises(UsdtSpecError) as info:
        parse_arg(text, arch)
    assert info.value.spec == text and info.value.expected


def test_error_names_probe_and_index():
    with pytest.raises(UsdtSpecError) as info:
        parse_arg("8@%nope", probe="prov:name", index=2)
    msg = str(info.value)
    assert "probe prov:name" in msg and "argument 2" in msg and "'8@%nope'" in msg
    assert info.value.probe == "prov:name" and info.value.index == 2


def test_not_a_string():
    with pytest.raises(UsdtSpecError):
        parse_arg(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# whole argument strings: splitting and the never-shift rule

def test_split_args():
    assert split_args("") == []
    assert split_args("   ") == []
    assert split_args("8@%rbx 8@%r15") == ["8@%rbx", "8@%r15"]
    assert split_args("8@x25 -4@[x22] 8@x3 2@[x22, 20] -4@[sp, 128] 2@[sp, 132]") == [
        "8@x25", "-4@[x22]", "8@x3", "2@[x22, 20]", "-4@[sp, 128]", "2@[sp, 132]"]
    assert split_args("8@x0 4@[x21, #:lo12:.LANCHOR2]") == ["8@x0", "4@[x21, #:lo12:.LANCHOR2]"]
    # an unbalanced bracket cannot swallow the next spec
    assert split_args("4@[x1, 8 8@x2") == ["4@[x1, 8", "8@x2"]
    assert split_args("-4@$0 8@$1234 %rdi %rax") == ["-4@$0", "8@$1234", "%rdi", "%rax"]


def test_bad_argument_does_not_shift_the_others():
    args = parse_args("8@%rdi -4@%esi 4@%bogus -2@(%rax) 1@$1", probe="p:n")
    assert len(args) == 5
    assert [a.decodable for a in args] == [True, True, False, True, True]
    assert args[3].kind is K.DEREF and args[4].value == 1
    bad = args[2]
    assert isinstance(bad, UndecodableArg) and bad.index == 2 and bad.text == "4@%bogus"
    assert bad.error.probe == "p:n" and bad.error.index == 2
    # using it raises the documented error; merely holding it does not
    with pytest.raises(UsdtSpecError, match="argument 2"):
        bad.check()
    with pytest.raises(UsdtSpecError):
        bad.kind  # noqa: B018
    with pytest.raises(UsdtSpecError):
        bad.size  # noqa: B018
    with pytest.raises(AttributeError):
        bad.no_such_attribute  # noqa: B018
    assert "undecodable" in bad.describe()
    assert bad.to_dict()["error"]


def test_bcc_parse_failure_vector_keeps_the_rest():
    # BCC loses every argument after this one (its parser desynchronises)
    args = parse_args("-4@g_table(,%rdi,4) 4@i%ra+1r 8@%rax")
    assert args[0].kind is K.SYM_INDEX
    assert not args[1].decodable
    assert args[2].reg == "rax"


def test_parse_is_cached_and_immutable():
    a = parse_arg("8@%rax")
    assert parse_arg(" 8@%rax ") is a
    with pytest.raises(AttributeError):
        a.size = 4  # type: ignore[misc]
    assert hash(a) == hash(parse_arg("8@%rax"))


def test_describe():
    assert parse_arg("-4@%edi").describe() == "s32 in edi (low 32 bits of rdi)"
    assert parse_arg("1@%ah").describe() == "u8 in ah (bits 8-15 of rax)"
    assert parse_arg("8@16(%rsp)").describe() == "u64 at [rsp + 16]"
    assert parse_arg("-4@g_table(,%rdi,4)").describe() == "s32 at [&g_table + rdi*4]"
    assert parse_arg("2@$-15536").describe() == "u16 = 50000 (written -15536)"
    assert parse_arg("-8@16+g_item(%rip)").describe() == "s64 at [&g_item + 16] (pc-relative)"
    assert parse_arg("8@g@GOTPCREL(%rip)").describe().startswith("u64 = GOT slot of g")
    assert parse_arg("8@16(%rip)").describe() == "u64 at [pc + 16]"


def test_to_dict_is_json_ready():
    import json
    d = parse_arg("-8@80(%rsp,%rax,8)").to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["kind"] == "sib" and d["size"] == 8 and d["signed"] is True
    assert d["reg"] == "rsp" and d["index"] == "rax" and d["scale"] == 8 and d["offset"] == 80


def test_reads_memory_and_needs_symbol():
    assert not parse_arg("8@%rax").reads_memory
    assert not parse_arg("8@$1").reads_memory
    assert parse_arg("8@(%rax)").reads_memory
    assert parse_arg("8@g(%rip)").needs_symbol and parse_arg("8@g(%rip)").reads_memory
    assert parse_arg("8@$g").needs_symbol and not parse_arg("8@$g").reads_memory
