"""The bpftrace language's lexer: token kinds, literals, escapes and the
positions bpftrace 0.17 gives tokens (no kernel)."""
from __future__ import annotations

import pytest

from pyebpf.lang.lexer import parse_int, tokenize


def kinds(text: str) -> list[tuple[str, object]]:
    toks, errors = tokenize(text)
    assert not errors, [str(e) for e in errors]
    return [(t.kind, t.value) for t in toks[:-1]]


def spans(text: str) -> list[tuple[str, int, int]]:
    toks, _ = tokenize(text)
    return [(t.kind, t.col, t.end_col) for t in toks[:-1]]


def test_words_are_builtins_calls_keywords_or_identifiers():
    assert kinds("pid arg0 arg10 pidx printf ustack perf bpftrace if else unroll foo") == [
        ("builtin", "pid"), ("builtin", "arg0"), ("identifier", "arg10"),
        ("identifier", "pidx"), ("call", "printf"), ("call_builtin", "ustack"),
        ("stack_mode", "perf"), ("stack_mode", "bpftrace"), ("if", None), ("else", None),
        ("unroll", None), ("identifier", "foo")]


def test_maps_variables_and_positional_parameters():
    assert kinds("@ @x @x_1 $v $1 $12 $#") == [
        ("map", "@"), ("map", "@x"), ("map", "@x_1"), ("variable", "$v"),
        ("positional parameter", "$1"), ("positional parameter", "$12"), ("$#", None)]


def test_operators_take_the_longest_match():
    ops = "<<= >>= += -= *= /= %= &= |= ^= == != <= >= << >> && || ++ -- -> < > = ! ~ ? ."
    assert [k for k, _ in kinds(ops)] == ops.split()


def test_attach_point_fields_are_path_tokens():
    assert kinds("uprobe:/bin/bash:readline+0x10") == [
        ("identifier", "uprobe"), ("path", ":/bin/bash"), ("path", ":readline"),
        ("+", None), ("integer", 16)]
    assert kinds("tracepoint:syscalls:sys_enter_*") == [
        ("identifier", "tracepoint"), ("path", ":syscalls"), ("path", ":sys_enter_*")]
    # a lone colon (the ternary's) stays a colon
    assert kinds("a ? b : c")[3] == (":", None)


@pytest.mark.parametrize("text, kind", [
    ("/ {", "end predicate"), ("/{", "end predicate"), ("/\n  /", "end predicate"),
    ("/ 2", "/"), ("/x", "/")])
def test_slash_ends_a_predicate_only_before_slash_or_brace(text, kind):
    assert tokenize(text)[0][0].kind == kind


@pytest.mark.parametrize("text, value", [
    ("42", 42), ("0x2a", 42), ("0X2A", 42), ("010", 8), ("0", 0), ("1_000", 1000),
    ("1_000_000", 10 ** 6), ("5u", 5), ("6ul", 6), ("7LL", 7), ("8ull", 8), ("1e3", 1000),
    ("2e4", 20000), ("18446744073709551615", 2 ** 64 - 1)])
def test_integer_literals(text, value):
    assert kinds(text) == [("integer", value)]
    assert parse_int(text) == value


@pytest.mark.parametrize("text, error", [
    ("1e30", "stdin:1:1-5: ERROR: Exponent will overflow integer range: 30"),
    ("12e3", "stdin:1:1-5: ERROR: Coefficient part of scientific literal must be in range "
             "(0,9), got: 12"),
    ("09u", "stdin:1:1-4: ERROR: Found trailing non-numeric characters"),
    # bpftrace says "stoull" here
    ("18446744073709551616",
     "stdin:1:1-21: ERROR: integer literal out of range: 18446744073709551616"),
    ("0x1ffffffffffffffff", "stdin:1:1-20: ERROR: integer literal out of range: "
                            "0x1ffffffffffffffff"),
])
def test_bad_integer_literals(text, error):
    _, errors = tokenize(text)
    assert str(errors[0]).splitlines()[0] == error


def test_a_bad_octal_literal_is_reported_and_skipped():
    toks, errors = tokenize("@ = 08;")
    assert [str(e).splitlines()[0] for e in errors] == [
        "stdin:1:5-7: ERROR: Found trailing non-numeric characters"]
    assert [t.kind for t in toks] == ["map", "=", ";", "end of file"]


@pytest.mark.parametrize("text, value", [
    (r'"a\nb"', "a\nb"), (r'"\t\r"', "\t\r"), (r'"q\"q"', 'q"q'), (r'"b\\s"', "b\\s"),
    (r'"\101\x42"', "AB"), (r'"\0"', "\0"), (r'"\x4"', "\x04"), ('""', "")])
def test_string_escapes(text, value):
    assert kinds(text) == [("string", value)]


@pytest.mark.parametrize("text, error", [
    ('"abc\\q"', "stdin:1:1-7: ERROR: invalid escape character '\\q'"),
    ('"abc', "stdin:1:1-5: ERROR: unterminated string"),
    ('"ab\ncd"', "stdin:1:1-4: ERROR: unterminated string"),
    ('"\\777"', "stdin:1:1-6: ERROR: octal escape sequence out of range '\\777'"),
    ("1 ` 2", "stdin:1:3-4: ERROR: invalid character '`'"),
    ("/* open", "stdin:1:1-8: ERROR: end of file during comment"),
])
def test_lexical_errors_have_bpftrace_positions(text, error):
    _, errors = tokenize(text)
    assert str(errors[0]).splitlines()[0] == error


def test_a_span_starts_after_the_last_blank_as_in_bpftrace():
    # no blank between tokens: each span starts where the last blank ended
    assert spans("$x=$y+1") == [("variable", 1, 3), ("=", 1, 4), ("variable", 1, 6),
                                ("+", 1, 7), ("integer", 1, 8)]
    assert spans("a + b") == [("identifier", 1, 2), ("+", 3, 4), ("identifier", 5, 6)]
    # a block comment does not end a span; a newline does
    assert spans("a /*c*/b") == [("identifier", 1, 2), ("identifier", 3, 9)]
    toks, _ = tokenize("a //c\n  b")
    assert (toks[1].line, toks[1].col, toks[1].end_col) == (2, 3, 4)


def test_comments_shebang_and_preprocessor_lines():
    assert kinds("#!/usr/bin/env bpftrace\n// x\n/* y\n z */ #include <linux/sched.h>\nBEGIN") \
        == [("preprocessor directive", "#include <linux/sched.h>"), ("identifier", "BEGIN")]


def test_struct_words_make_a_cast_type_or_a_definition():
    assert kinds("(struct task_struct *)") == [
        ("(", None), ("identifier", "struct task_struct"), ("*", None), (")", None)]
    assert kinds("struct foo { int x; struct { int y; } z; };") == [
        ("struct definition", "struct foo { int x; struct { int y; } z; };")]


def test_lines_are_counted():
    toks, _ = tokenize("BEGIN\n{\n\n  exit()\n}")
    assert [(t.kind, t.line) for t in toks] == [
        ("identifier", 1), ("{", 2), ("call", 4), ("(", 4), (")", 4), ("}", 5),
        ("end of file", 5)]
