"""The shared lexer: tokens, the fast path, line decorations and operand ranges."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from pyebpf.text.lexer import (TextError, fast_tokenize, imm32, imm64, off16, split_line,
                               tokenize)

PIECES = ["r1", "w10", "%r3", "R2", "r11", "0x1f", "0XFF", "12", "007", "-", "+", "=", "+=", "s>>=",
          "s>", "<=", "&", "&=", "*", "(", ")", "[", "]", ",", ":", "u64", "goto", "pc",
          "bpf_map_lookup_elem#1", "kernel-function#-3", "abc", ".L1", "x.y", "a$b", "#", "@",
          "12abc", "r1x", "s", "/", "%", " ", "\t", "  "]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_fast_tokenize_agrees_with_tokenize(parts):
    text = "".join(parts)
    fast = fast_tokenize(text)
    try:
        slow = tokenize(text, 1)
    except TextError:
        assert fast is None
        return
    assert fast is not None
    assert [(t.key, t.text, t.value, t.hex) for t in fast] == \
        [(t.key, t.text, t.value, t.hex) for t in slow]


def test_token_kinds_and_columns():
    toks = tokenize("if w5 s>= 0x3 goto pc-1", 5)
    assert [(t.key, t.col) for t in toks] == [
        ("id", 5), ("w", 8), ("cop", 11), ("n", 15), ("id", 19), ("id", 24), ("-", 26), ("n", 27)]
    assert toks[3].value == 3 and toks[3].hex
    (t,) = tokenize("bpf_map_lookup_elem#1")
    assert t.key == "idnum" and t.value == ("bpf_map_lookup_elem", 1)
    with pytest.raises(TextError) as info:
        tokenize("r1 = 5 @", 1)
    assert info.value.col == 8


@pytest.mark.parametrize("line,expected", [
    ("  r0 = 1", [("  r0 = 1", 1, None)]),
    ("r0 = 1 # c", [("r0 = 1 ", 1, None)]),
    ("r0 = 1 // c", [("r0 = 1 ", 1, None)]),
    ("; source line", []),
    ("r0 = 0; r1 = 1", [("r0 = 0", 1, None), (" r1 = 1", 8, None)]),
    ("call bpf_map_lookup_elem#1", [("call bpf_map_lookup_elem#1", 1, None)]),
    ("      23:\tbf 14 00 00 00 00 00 00\tr4 = r1", [("r4 = r1", 35, None)]),
    ("      11:\t15 00 02 00 00 00 00 00\tif r0 == 0 goto +2 <LBB0_2>",
     [("if r0 == 0 goto +2", 35, None)]),
    ("39: (85) call bpf_map_lookup_elem#1   ; R0=map_value_or_null(id=2,ks=4,vs=8)",
     [("call bpf_map_lookup_elem#1   ", 10, 0x85)]),
    ("      3: 0.....6... (7a) *(u64 *)(r10 -8) = 5", [("*(u64 *)(r10 -8) = 5", 26, 0x7a)]),
    ("(b7) r0 = 0", [("r0 = 0", 6, 0xb7)]),
    ("r0 = 0                        ; R0=0", [("r0 = 0                        ", 1, None)]),
    ("r2 = r10 ; R2_w=fp0 R10=fp0", [("r2 = r10 ", 1, None)]),
    ("exit ; frame1: R0=7", [("exit ", 1, None)]),
    ("0000000000000198 <endian>:", [("endian:", 19, None)]),
    ("Disassembly of section .text:", []),
    ("t.o:\tfile format elf64-bpf", []),
    ("\t\t0000000000000040:  R_BPF_64_64\tcounts", []),
    ("       b7 00 00 00 00 00 00 00", []),
    ("12:", []),
])
def test_split_line(line, expected):
    assert [tuple(p) for p in split_line(line)] == expected


def test_split_line_mnemonic_semicolon_is_a_comment():
    assert [p.text for p in split_line("mov %r0, 1 ; b7 00", semicolons=False)] == ["mov %r0, 1 "]


def test_ranges():
    (t,) = tokenize("0xffffffff")
    assert imm32(t) == -1
    (t,) = tokenize("2147483647")
    assert imm32(t) == 2147483647
    (t,) = tokenize("2147483648")
    assert imm32(t, negative=True) == -(1 << 31)
    with pytest.raises(TextError):
        imm32(t)
    (t,) = tokenize("0xffff")
    assert off16(t) == -1
    (t,) = tokenize("32768")
    assert off16(t, negative=True) == -32768
    with pytest.raises(TextError):
        off16(t)
    (t,) = tokenize("1")
    assert imm64(t, negative=True) == (1 << 64) - 1
