"""Property tests: bytes <-> Insn <-> text, for every instruction form and both dialects."""
from __future__ import annotations

import struct

import pytest

from hypothesis import HealthCheck, given, settings, strategies as st

from budget import fuzz_settings
from insn_strategies import FORM_KINDS, insns
from pyebpf.isa import Insn, classify, decode, encode, opcodes as op
from pyebpf.program import RawSlot
from pyebpf.text import assemble, disassemble, format_insn, get_instructions, parse_insn
from pyebpf.text.disasm import usable_label

SETTINGS = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPELLINGS = [("llvm", "objdump"), ("llvm", "verifier"), ("mnemonic", "objdump")]


@SETTINGS
@given(insns)
def test_strategy_makes_valid_instructions(insn):
    assert classify(insn).kind in FORM_KINDS


def test_strategy_covers_every_form():
    seen = set()

    @settings(max_examples=3000, deadline=None)
    @given(insns)
    def collect(insn):
        seen.add(classify(insn).kind)

    collect()
    assert seen == FORM_KINDS


@SETTINGS
@given(insns)
def test_bytes_insn_bytes(insn):
    data = insn.encode()
    assert len(data) == 8 * insn.slots
    back = decode(data)
    assert len(back) == 1 and back[0] == insn
    assert back[0].encode() == data


@SETTINGS
@given(insns)
def test_text_roundtrip_llvm_objdump(insn):
    text = format_insn(insn, "llvm", "objdump")
    assert not text.startswith(".8byte"), text
    assert parse_insn(text, "llvm").fields() == insn.fields(), text


@SETTINGS
@given(insns)
def test_text_roundtrip_llvm_verifier(insn):
    text = format_insn(insn, "llvm", "verifier")
    assert not text.startswith(".8byte"), text
    assert parse_insn(text, "llvm").fields() == insn.fields(), text
    # and as the verifier log prints it, with index and opcode in front
    line = f"12: ({insn.code:02x}) {text}                 ; R1=ctx() R10=fp0"
    assert parse_insn(line, "llvm").fields() == insn.fields(), line


@SETTINGS
@given(insns)
def test_text_roundtrip_mnemonic(insn):
    text = format_insn(insn, "mnemonic")
    assert not text.startswith(".8byte"), text
    assert parse_insn(text, "mnemonic").fields() == insn.fields(), text


@SETTINGS
@given(insns)
def test_objdump_line_pasted_back(insn):
    """An llvm-objdump line (index, raw bytes, text) parses to the same instruction."""
    data = insn.encode()
    raw = " ".join(f"{b:02x}" for b in data)
    line = f"      42:\t{raw}\t{format_insn(insn)}"
    assert parse_insn(line).fields() == insn.fields()


def _slots(draw_values):
    """Bytes from a list of (slot, maybe second slot) values."""
    return b"".join(struct.pack("<Q", v) for v in draw_values)


@st.composite
def programs(draw):
    """Programs of valid and random slots, lone ld_imm64 first slots among them."""
    out = []
    for _ in range(draw(st.integers(1, 30))):
        if draw(st.integers(0, 3)) == 0:
            value = draw(st.integers(0, (1 << 64) - 1))
            code = value & 0xFF
            if code == op.OP_LD_IMM64:
                out.append(value)
                if draw(st.booleans()):
                    out.append(draw(st.integers(0, (1 << 32) - 1)) << 32)
                # else: a lone ld_imm64 slot (whatever follows is not a second slot)
            else:
                out.append(value)
        else:
            insn = draw(insns)
            if insn.code != op.OP_LD_IMM64 and (insn.code & 7) in (op.JMP, op.JMP32) \
                    and draw(st.booleans()):
                # small jumps, so that many land inside the program and get labels
                if insn.code in (op.OP_GOTOL, op.OP_CALL):
                    if insn.code == op.OP_GOTOL or insn.src == 1:
                        insn.imm = draw(st.integers(-5, 5))
                elif insn.code not in (op.OP_GOTOX, op.OP_CALLX, op.OP_EXIT):
                    insn.off = draw(st.integers(-5, 5))
            out.extend(struct.unpack(f"<{insn.slots}Q", insn.encode()))
    return _slots(out)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_disassembly_reassembles_to_same_bytes(data):
    for dialect, style in SPELLINGS:
        for labels in (True, False):
            text = disassemble(data, dialect, style, labels=labels)
            assert assemble(text, dialect).encode() == data, text
    text = disassemble(data, "llvm", show_index=True)
    assert assemble(text).encode() == data, text


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_disassembler_never_fails(data):
    for dialect, style in SPELLINGS:
        text = disassemble(data, dialect, style)
        assert isinstance(text, str)
    assert len(get_instructions(data)) <= len(data) // 8 + 1


def test_symbolic_map_references_roundtrip():
    for text, dialect in [("r1 = counts ll", "llvm"), ("r1 = map_fd(counts)", "llvm"),
                          ("lddw %r1, counts", "mnemonic"), ("lddw %r1, map_fd(counts)", "mnemonic")]:
        insn = parse_insn(text, dialect)
        assert (insn.code, insn.src, insn.imm, insn.map_ref) == (0x18, op.PSEUDO_MAP_FD, 0, "counts")
    insn = parse_insn("r2 = map_value(.rodata) + 16 ll")
    assert (insn.src, insn.next_imm, insn.map_ref) == (op.PSEUDO_MAP_VALUE, 16, ".rodata")
    for dialect, style in SPELLINGS:
        for src in (op.PSEUDO_MAP_FD, op.PSEUDO_MAP_VALUE, op.PSEUDO_MAP_IDX, op.PSEUDO_MAP_IDX_VALUE):
            insn = Insn(0x18, 3, src, 0, 0, 24 if src in (2, 6) else 0, map_ref="my_map")
            text = format_insn(insn, dialect, style)
            back = parse_insn(text, dialect)
            assert back.fields() == insn.fields() and back.map_ref == "my_map", text


def test_labels_and_func_references_assemble():
    prog = assemble("""
        r1 = func(callback) ll     # ld_imm64 src=4, relative to callback
        call helper_fn
        if r0 == 0 goto out
        r0 = 1
    out:
        exit
    callback:
        r0 = 0
        exit
    helper_fn:
        exit
    """)
    insns = prog.finalize()
    # slots: lddw 0-1, call 2, if 3, mov 4, exit 5, callback 6-7, helper_fn 8
    assert insns[0].src == op.PSEUDO_FUNC and insns[0].imm == 5
    assert insns[1].src == op.CALL_LOCAL and insns[1].imm == 5
    assert insns[2].off == 1
    assert [i.origin for i in insns][:2] == ["<string>:2", "<string>:3"]
    text = disassemble(prog.encode())
    assert "r1 = func(F6) ll" in text and "call F8" in text
    assert assemble(text).encode() == prog.encode()


def test_encode_of_decoded_program_is_identity():
    data = encode([Insn(0xb7, 0, 0, 0, 1), Insn(0x18, 1, 0, 0, -1, 5), Insn(0x95)])
    assert encode(decode(data)) == data


ALL_SPELLINGS = [("llvm", "objdump"), ("llvm", "verifier"), ("mnemonic", "objdump"),
                 ("mnemonic", "verifier")]


def _assert_reassembles(data: bytes) -> None:
    for dialect, style in ALL_SPELLINGS:
        for labels in (True, False):
            text = disassemble(data, dialect, style, labels=labels)
            assert assemble(text, dialect).encode() == data, (dialect, style, text)


@fuzz_settings(300)
@given(st.integers(0, 12).flatmap(lambda n: st.binary(min_size=8 * n, max_size=8 * n)))
def test_any_bytes_disassemble_and_assemble_back(data):
    """Whatever the disassembler prints for any bytes (a multiple of 8),
    the assembler turns back into the same bytes, in every dialect/style."""
    _assert_reassembles(data)


@pytest.mark.parametrize("data", [
    bytes.fromhex("1801000000000000"),                                   # lone, last slot
    bytes.fromhex("18010000ffffffff" "b700000001000000" "9500000000000000"),  # bad 2nd slot
    bytes.fromhex("b700000001000000" "1800000000000000" "1800000000000000"),  # two lone
    bytes.fromhex("1801000000000000" "0001000000000000"),                # 2nd slot: dst set
])
def test_lone_ld_imm64_slot_roundtrips(data):
    _assert_reassembles(data)
    text = disassemble(data)
    assert "ld_imm64 without a valid second slot" in text


def test_lone_ld_imm64_slot_is_a_raw_slot():
    prog = assemble(".8byte 0x0000000500001018\nexit")
    first = prog.finalize()[0]
    assert isinstance(first, RawSlot) and first.value == 0x0000000500001018
    assert prog.encode() == bytes.fromhex("1810000005000000" "9500000000000000")
    assert prog.slot_count == 2
    # a valid pair in one directive is still one ld_imm64
    pair = assemble(".8byte 0x0000000500001018, 0x0000000700000000").finalize()
    assert len(pair) == 1 and pair[0].imm64 == (7 << 32) | 5


_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,8}", fullmatch=True).filter(usable_label)


@fuzz_settings(300)
@given(st.lists(insns, min_size=1, max_size=12), st.data())
def test_listing_with_symbols_assembles_back(program, data):
    """An object section's listing -- symbols as labels (llvm-objdump's
    ``<name>:`` lines or ``name:``), source and comment lines before
    instructions, relocated slots, synthetic labels with a prefix -- assembles
    back to the same bytes."""
    code = b"".join(i.encode() for i in program)
    starts = [ins.index for ins in get_instructions(code)]
    chosen = data.draw(st.lists(st.sampled_from(starts), unique=True, max_size=4))
    names = data.draw(st.lists(_NAMES, min_size=len(chosen), max_size=len(chosen), unique=True))
    symbols = dict(zip(chosen, names))
    before = {s: ["; int x = 1;  // a C line", "# a note"] for s in
              data.draw(st.lists(st.sampled_from(starts), max_size=3))}
    relocated = set(data.draw(st.lists(st.sampled_from(starts), max_size=3)))
    for dialect, style in SPELLINGS:
        text = disassemble(code, dialect, style, show_index=data.draw(st.booleans()),
                           symbols=symbols, label_prefix=data.draw(st.sampled_from(["", "s3_"])),
                           before=before, objdump_labels=data.draw(st.booleans()),
                           relocated=relocated)
        assert assemble(text, dialect).encode() == code, text
        for slot, name in symbols.items():
            assert f"{name}:" in text or f"<{name}>:" in text
