"""The 313 bpf_conformance programs: they assemble in the mnemonic dialect, match
their ``-- raw`` sections, and their disassembly reassembles identically."""
from __future__ import annotations

import pytest

from pyebpf.errors import AssemblyError
from pyebpf.isa import classify
from pyebpf.text import assemble, disassemble, load_conformance, parse_conformance

SPELLINGS = [("mnemonic", "objdump"), ("llvm", "objdump"), ("llvm", "verifier")]


@pytest.fixture(scope="module")
def tests(conformance_dir):
    files = sorted(conformance_dir.glob("*.data"))
    return [load_conformance(p) for p in files]


def test_there_are_313_programs(tests):
    assert len(tests) == 313


def test_every_program_assembles_and_matches_raw(tests):
    failures = []
    with_raw = 0
    for t in tests:
        try:
            code = t.asm_bytes()
        except AssemblyError as exc:
            failures.append(f"{t.name}: {exc}")
            continue
        assert code, t.name
        if t.raw is not None:
            with_raw += 1
            if t.raw_bytes() != code:
                failures.append(f"{t.name}: assembled asm differs from -- raw")
        # every instruction of the suite is one classify knows (callx included)
        prog = t.program()
        for insn in prog.finalize():
            classify(insn)
            assert insn.origin.startswith(t.path + ":"), insn.origin
    assert not failures, "\n".join(failures)
    assert with_raw == 1   # lddw.data


def test_disassembly_reassembles_identically(tests):
    failures = []
    for t in tests:
        code = t.asm_bytes()
        for dialect, style in SPELLINGS:
            for labels in (True, False):
                text = disassemble(code, dialect, style, labels=labels)
                try:
                    again = assemble(text, dialect, f"{t.name}.{dialect}").encode()
                except AssemblyError as exc:
                    failures.append(f"{t.name} ({dialect}/{style}): {exc}")
                    continue
                if again != code:
                    failures.append(f"{t.name} ({dialect}/{style}, labels={labels}): bytes differ")
    assert not failures, "\n".join(failures[:20])


def test_results_and_memory_are_read(tests):
    by_name = {t.name: t for t in tests}
    lddw = by_name["lddw"]
    assert lddw.result == 0x1122334455667788 and lddw.raw == [0x5566778800000018,
                                                            0x1122334400000000, 0x95]
    assert all(t.result is not None or t.error is not None for t in tests)
    assert sum(1 for t in tests if t.mem) >= 30
    assert not [t.name for t in tests if t.skip_reason]


def test_negative_files(conformance_dir):
    neg = conformance_dir / "negative"
    # assembly errors carry the C++ assembler's words where the suite checks them
    for name, words in [("invalid_lock", "Invalid number of operands for lock"),
                        ("invalid_lock2", "Invalid number of operands for lock"),
                        ("invalid_register", "Invalid register"),
                        ("invalid_mnemonic", "Invalid mnemonic"),
                        ("invalid_operand_count", "Invalid number of operands"),
                        ("invalid_label", "unknown label"),
                        ("invalid_offset_range", "does not fit in 16 bits"),
                        ("invalid_imm32_hex_range", "does not fit in 32 bits"),
                        ("invalid_imm32_dec_range", "does not fit in a signed 32-bit"),
                        ("invalid_offset", "memory operand")]:
        t = load_conformance(neg / f"{name}.data")
        with pytest.raises(AssemblyError) as info:
            t.code()
        assert words in str(info.value), (name, str(info.value))
        assert info.value.filename.endswith(f"{name}.data") and info.value.line >= 4
    # raw byte rows make invalid instructions: they disassemble to .8byte and back
    unused = sorted(neg.glob("unused-*.data"))
    assert len(unused) >= 40
    for p in unused:
        t = load_conformance(p)
        code = t.code()
        assert len(code) == 16, p.name
        text = disassemble(code)
        assert ".8byte" in text and "invalid instruction" in text, text
        assert assemble(text).encode() == code
    assert load_conformance(neg / "invalid_unknown_directive.data").skip_reason.startswith(
        "unknown directive")
    assert load_conformance(neg / "empty.data").skip_reason == "no result and no error"


def test_parser_details():
    t = parse_conformance("""# header
-- asm
mov %r0, 1   # comment
ja done
done:
exit
-- mem
00 01 ff
  aa
-- result
0x2a
""", "x.data")
    assert t.result == 0x2a and t.mem == bytes([0, 1, 0xff, 0xaa])
    prog = t.program()
    assert [i.origin for i in prog.finalize()] == ["x.data:3", "x.data:4", "x.data:6"]
    with pytest.raises(AssemblyError) as info:
        parse_conformance("-- asm\nmov %r0, 1\nfoo %r1\n-- result\n1\n", "y.data").program()
    assert (info.value.line, info.value.column) == (3, 1)
    dec = parse_conformance("-- asm\nexit\n-- result\n 42\n")
    assert dec.result == 42
