import pytest
from hypothesis import given, strategies as st

from pyebpf.errors import EncodingError
from pyebpf.isa import HELPERS, Insn, classify, decode, encode, helper, helper_name
from pyebpf.isa import opcodes as op


def test_ld_imm64_round_trip():
    insn = Insn(op.OP_LD_IMM64, 3)
    insn.imm64 = 0x123456789ABCDEF0
    data = encode([insn, Insn(op.OP_EXIT)])
    assert data.hex() == "18030000f0debc9a00000000785634129500000000000000"
    back = decode(data)
    assert back[0].imm64 == 0x123456789ABCDEF0 and back == [insn, Insn(op.OP_EXIT)]


@given(st.binary(min_size=8, max_size=8))
def test_any_single_slot_decodes_and_reencodes(raw):
    if raw[0] == op.OP_LD_IMM64:
        return
    assert encode(decode(raw)) == raw


def test_truncated_and_bad_second_slot():
    with pytest.raises(EncodingError, match="multiple of 8"):
        decode(b"\x95" * 9)
    with pytest.raises(EncodingError, match="second slot"):
        decode(bytes([0x18]) + bytes(7))
    with pytest.raises(EncodingError, match="second slot of ld_imm64"):
        decode(bytes([0x18]) + bytes(7) + bytes([0x95]) + bytes(7))


@pytest.mark.parametrize("insn, kind, opname", [
    (Insn(0x07, 1, 0, 0, 5), "alu", "add"),
    (Insn(0x3c, 1, 2, 1, 0), "alu", "sdiv"),
    (Insn(0xbf, 1, 2, 32, 0), "movsx", "movsx"),
    (Insn(0xd7, 1, 0, 0, 64), "end", "bswap"),
    (Insn(0xdc, 1, 0, 0, 16), "end", "be"),
    (Insn(0x91, 1, 2, -3, 0), "ldxs", "ldxs"),
    (Insn(0xdb, 10, 1, -8, 0xe1), "atomic", "xchg"),
    (Insn(0xd3, 1, 2, 0, 0x110), "atomic", "store_release"),
    (Insn(0xcb, 1, 2, 0, 0x100), "atomic", "load_acquire"),
    (Insn(0x06, 0, 0, 0, 100000), "gotol", "gotol"),
    (Insn(0xe5, 0, 0, 3, 0), "may_goto", "may_goto"),
    (Insn(0x85, 0, 1, 0, 4), "call", "call"),
    (Insn(0x28, 0, 0, 0, 12), "ldabs", "ldabs"),
    (Insn(0x5e, 1, 2, 4, 0), "jcc", "jne"),
])
def test_classify(insn, kind, opname):
    form = classify(insn)
    assert (form.kind, form.op) == (kind, opname)


@pytest.mark.parametrize("insn, why", [
    (Insn(0x07, 1, 3, 0, 5), "src must be 0"),        # K form with a source register
    (Insn(0x3c, 1, 2, 2, 0), "offset must be 0"),      # div with off 2
    (Insn(0xb4, 1, 0, 8, 0), "mov offset"),            # movsx on K form
    (Insn(0xbc, 1, 2, 32, 0), "mov offset"),           # ALU32 movsx 32 does not exist
    (Insn(0xd4, 1, 0, 0, 8), "width"),                 # le8
    (Insn(0xc3 | 0x10, 1, 2, 0, 0), "32 and 64 bits"), # 8-bit atomic add
    (Insn(0x96, 0, 0, 0, 0), "exit is only"),          # JMP32 exit
    (Insn(0x85, 1, 0, 0, 1), "dst must be 0"),
    (Insn(0x07, 11, 0, 0, 0), "r11"),
    (Insn(0xf7, 1, 0, 0, 0), "unknown ALU"),
    (Insn(0x99, 1, 0, 0, 0), "LDX mode"),
])
def test_classify_rejects(insn, why):
    with pytest.raises(EncodingError, match=why):
        classify(insn)


def test_helper_table():
    assert len(HELPERS) == 212
    assert [h.id for h in HELPERS] == list(range(212))
    assert helper("bpf_map_lookup_elem").id == 1
    assert helper(130).name == "ringbuf_output"
    assert helper("probe_read_user").gpl_only and not helper("map_lookup_elem").gpl_only
    assert helper("map_update_elem").args == ("map", "map_key", "map_value", "scalar")
    assert helper_name(5) == "ktime_get_ns" and helper_name(9999) is None
    with pytest.raises(KeyError, match="did you mean map_lookup_elem"):
        helper("map_lookup_elemm")


@pytest.mark.parametrize("dst, src", [(16, 0), (0, 16), (-1, 0), (0, -3), (255, 255)])
def test_one_encoder_refuses_a_bad_register(dst, src):
    """Insn.encode, isa.encode and Program.encode share one encoder: none of
    them lets a register outside r0..r15 spill into the other 4-bit field."""
    from pyebpf.isa import encode
    from pyebpf.program import Program

    bad = Insn(0x07, dst, src, 0, 1)          # r{dst} += 1
    p = Program("bad")
    p.insns.append(bad)
    p.exit()
    for encode_it in (bad.encode, lambda: encode([bad]), p.encode):
        with pytest.raises(EncodingError, match="register number out of range"):
            encode_it()
