"""Every kind of assembly error names file:line:column and points at the offending token."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from budget import fuzz_settings
from pyebpf.errors import AssemblyError
from pyebpf.text import assemble, parse_insn


def error_of(text: str, dialect: str = "llvm") -> AssemblyError:
    with pytest.raises(AssemblyError) as info:
        assemble(text, dialect, "prog.s")
    return info.value


def where(text: str, dialect: str = "llvm") -> tuple[int, int, str]:
    e = error_of(text, dialect)
    assert e.filename == "prog.s"
    return e.line, e.column, e.reason


def col_of(line: str, token: str) -> int:
    return line.index(token) + 1


@pytest.mark.parametrize("dialect,text,token,words", [
    # unknown mnemonic / instruction
    ("llvm", "    frob r1", "frob", "unknown instruction 'frob'"),
    ("llvm", "r1 @ 5", "@", "unexpected character"),
    ("mnemonic", "ldxq %r0, [%r1]", "ldxq", "Invalid mnemonic: ldxq"),
    ("mnemonic", "lock nand [%r1], %r2", "nand", "unknown atomic operation"),
    # bad register
    ("llvm", "r11 = 1", "r11", "register r11 does not exist"),
    ("llvm", "r1 = *(u64 *)(r12 + 0)", "r12", "register r12 does not exist"),
    ("llvm", "w1 += r2", "r2", "differ in width"),
    ("mnemonic", "or %r0, %r50", "%r50", "Invalid register: %r50"),
    ("mnemonic", "mov r0, 1", "r0", "written %r0"),
    # immediate out of range
    ("llvm", "r1 += 0x100000000", "0x100000000", "does not fit in 32 bits"),
    ("llvm", "r1 += 2147483648", "2147483648", "signed 32-bit"),
    ("llvm", "r1 += -2147483649", "2147483649", "does not fit in 32 bits"),
    ("llvm", "r1 = 0x10000000000000000 ll", "0x10000000000000000", "64 bits"),
    ("mnemonic", "mov32 %r0, 0x100000000", "0x100000000", "does not fit in 32 bits"),
    # offset out of range
    ("llvm", "r0 = *(u32 *)(r1 + 32768)", "32768", "does not fit in 16 bits"),
    ("llvm", "goto +32768", "32768", "jump offset"),
    ("llvm", "if r1 > 2 goto -32769", "32769", "jump offset"),
    ("mnemonic", "ldxb %r0, [%r1+0x10000]", "0x10000", "does not fit in 16 bits"),
    ("mnemonic", "ja +40000", "40000", "jump offset"),
    # wrong operand count / shape
    ("mnemonic", "lddw %r0", None, "Invalid number of operands for mnemonic: lddw"),
    ("mnemonic", "add %r1, %r2, %r3", "%r3", "Invalid number of operands"),
    ("mnemonic", "exit %r0", "%r0", "Invalid number of operands"),
    ("mnemonic", "lock or [%r10-8]", None, "Invalid number of operands for lock"),
    ("llvm", "r0 = cmpxchg_64(r1 + 0, r0)", ")", "expected ','"),
    ("llvm", "if r1 > 2 goto", None, "incomplete instruction"),
    # semantic checks
    ("llvm", "r0 = cmpxchg_64(r1 + 0, r2, r3)", "r2", "compares with r0"),
    ("llvm", "r1 = be16 r2", "r2", "same register"),
    ("llvm", "r1 = *(s64 *)(r2 + 0)", "s64", "expected a type"),
    ("llvm", "*(s8 *)(r2 + 0) = r1", "s8", "only for sign-extending loads"),
    ("llvm", "r1 = foo(3) ll", "foo", "unknown ld_imm64 pseudo source"),
    ("llvm", ".word 5", ".word", "unknown directive"),
    ("llvm", ".8byte 0x18, 0x1ffffffffffffffff", "0x1ffffffffffffffff", "64 bits"),
])
def test_error_points_at_token(dialect, text, token, words):
    source = "    exit\n" + text + "\n    exit\n"
    line, col, reason = where(source, dialect)
    assert line == 2, reason
    assert words in reason
    if token is None:  # missing operand: the column is at the end of the statement
        assert col == len(text.rstrip()) + 1 or col == len(text) + 1, (col, reason)
    else:
        assert col == col_of(text, token), (col, reason)


def test_unknown_label_names_line_and_column():
    text = "r0 = 0\nif r0 == 0 goto nowhere\nexit\n"
    line, col, reason = where(text)
    assert (line, col) == (2, col_of("if r0 == 0 goto nowhere", "nowhere"))
    assert "unknown label 'nowhere'" in reason
    line, col, reason = where("mov %r0, 0\n  jeq %r0, 0, nowhere\nexit\n", "mnemonic")
    assert (line, col) == (2, col_of("  jeq %r0, 0, nowhere", "nowhere"))
    line, col, reason = where("call missing_function\nexit\n")
    assert (line, col) == (1, 6) and "missing_function" in reason


def test_call_of_a_misspelt_helper_names_the_helper():
    # as the DSL does: a name after `call` close to a helper's is its typo
    line, col, reason = where("call bpf_map_lookup_elm\nexit\n")
    assert (line, col) == (1, 6)
    assert reason.startswith("unknown helper or function 'bpf_map_lookup_elm'; "
                             "did you mean bpf_map_lookup_elem"), reason
    assert "did you mean bpf_ktime_get_ns" in where("call ktime_get_nss\nexit\n")[2]
    # a jump's unknown target is still a label
    assert where("goto bpf_map_lookup_elm\nexit\n")[2].startswith("unknown label")


def test_a_mnemonic_in_the_llvm_dialect_names_the_dialects():
    line, col, reason = where("mov r0, 1\nexit\n")
    assert (line, col) == (1, 1) and "mnemonic dialect" in reason and "--dialect mnemonic" in reason
    assert "mnemonic dialect" in where("ldxw r0, [r1+4]\nexit\n")[2]
    assert where("frob r0\nexit\n")[2] == "unknown instruction 'frob'"


def test_duplicate_label():
    line, col, reason = where("a:\n  r0 = 0\n  a: exit\n")
    assert (line, col) == (3, 3) and "duplicate label 'a'" in reason and "line 1" in reason
    line, col, reason = where("exit\nexit:\nexit\n", "mnemonic")
    assert (line, col) == (2, 1) and "implicitly" in reason


def test_jump_too_far_for_a_label_is_reported_at_the_jump():
    body = "r0 = 0\n" * 40000
    text = "goto far\n" + body + "far:\nexit\n"
    line, col, reason = where(text)
    assert (line, col) == (1, 6)
    assert "16-bit" in reason and "gotol" in reason
    # gotol reaches it
    prog = assemble("gotol far\n" + body + "far:\nexit\n")
    assert prog.finalize()[0].imm == 40000


def test_message_format_has_line_and_caret():
    e = error_of("r0 = 0\n\tr1 += 0x100000000\n")
    text = str(e)
    first, shown, caret = text.split("\n")
    assert first.startswith("prog.s:2:8: error: ")
    assert shown.strip() == "r1 += 0x100000000"
    assert caret.index("^") == shown.index("0x100000000")


def test_origin_of_every_instruction():
    prog = assemble("r0 = 0   # one\n\nr1 = 2 ; r2 = 3\nlabel: exit\n", filename="t.s")
    assert [i.origin for i in prog.finalize()] == ["t.s:1", "t.s:3", "t.s:3", "t.s:4"]


def test_parse_insn_errors():
    with pytest.raises(AssemblyError) as info:
        parse_insn("r0 = 0; r1 = 1")
    assert "exactly one" in info.value.reason
    with pytest.raises(AssemblyError):
        parse_insn("# nothing")
    with pytest.raises(ValueError):
        parse_insn("exit", dialect="intel")


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        assemble("nonsense here")


# ---------------------------------------------------------------- property tests
_LINES = {
    "llvm": ["r0 = 0", "exit", "r1 = *(u32 *)(r2 + 4)", "if w1 > 5 goto +2", "call 1",
             "r1 = counts ll", "r2 = 0x1122334455667788 ll", "lock *(u64 *)(r1 + 0) += r2",
             "r0 = cmpxchg_64(r1 + 0, r0, r2)", "w3 = be16 w3", "goto -1", "L1: r0 <<= 3",
             ".8byte 0x18, 0", "r0 = map_value(counts) + 8 ll", "callx r1"],
    "mnemonic": ["mov32 %r0, 1", "exit", "ldxw %r0, [%r1+4]", "jgt32 %r0, 5, +1",
                 "lddw %r1, 0x1122334455667788", "call 1", "lddw %r1, counts", "neg %r1",
                 "stxdw [%r10-8], %r1", "ja -1", "x: add %r1, 2", ".8byte 0x95"],
}
_NOISE = st.sampled_from(list(" \t,;:#()[]+-*/%&|^<>=!.$@\\\"'0x9fFrwl_") +
                         ["r11", "w10", "ll", "goto", "%r", "+0x7fffffff", "-0x80000001",
                          "99999999999999999999", "*(u64 *)", "0" * 5000, "(" * 50, "\x00", "é"])


@st.composite
def _mutated_text(draw, dialect):
    lines = draw(st.lists(st.sampled_from(_LINES[dialect]), min_size=1, max_size=6))
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(0, len(lines) - 1))
        line = lines[k]
        pos = draw(st.integers(0, len(line)))
        how = draw(st.integers(0, 2))
        if how == 0:
            line = line[:pos] + draw(_NOISE) + line[pos:]
        elif how == 1:
            line = line[:pos] + line[pos + draw(st.integers(1, 4)):]
        else:
            line = line[:pos] + draw(_NOISE) + line[pos + 1:]
        lines[k] = line
    return "\n".join(lines)


def _assemble_or_documented_error(text: str, dialect: str) -> None:
    try:
        prog = assemble(text, dialect, "fuzz.s")
        prog.encode()
    except AssemblyError as exc:
        assert exc.filename == "fuzz.s" and exc.line >= 1


@fuzz_settings(300)
@given(st.sampled_from(["llvm", "mnemonic"]).flatmap(
    lambda d: st.tuples(st.just(d), _mutated_text(d))))
def test_mutated_text_gives_only_assembly_errors(case):
    dialect, text = case
    _assemble_or_documented_error(text, dialect)


@fuzz_settings(200)
@given(st.sampled_from(["llvm", "mnemonic"]), st.text(max_size=120))
def test_arbitrary_text_gives_only_assembly_errors(dialect, text):
    _assemble_or_documented_error(text, dialect)


def test_unknown_dialect_or_style_is_an_option_error():
    from pyebpf.errors import OptionError
    from pyebpf.text import disassemble
    with pytest.raises(OptionError):
        assemble("exit", "intel")
    with pytest.raises(OptionError):
        disassemble(b"\x95" + bytes(7), style="gnu")
