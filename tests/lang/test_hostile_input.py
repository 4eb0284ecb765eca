"""Hostile programs come back as LangError with a position, in bounded
memory: huge literals, many errors on one long line, deep nesting (issue 24,
items 10-12)."""
from __future__ import annotations

import tracemalloc

import pytest

from pyebpf import lang
from pyebpf.lang.errors import LangError
from pyebpf.lang.parser import parse


@pytest.mark.parametrize("literal", ["9" * 5000, "0x" + "f" * 5000, "0" + "7" * 5000,
                                     "1" * 5000 + "ul", "0" * 5000 + "1" * 30])
def test_a_huge_literal_is_out_of_range_in_every_base(literal: str) -> None:
    with pytest.raises(LangError) as err:
        parse(f"BEGIN {{ @x = {literal}; }}")
    assert err.value.message == f"integer literal out of range: {literal}"
    assert err.value.pos is not None and err.value.pos.column == 14


def test_leading_zeros_do_not_make_a_literal_huge() -> None:
    assert parse("BEGIN { @x = " + "0" * 5000 + "17; }")  # octal 017


def test_a_huge_parameter_index_is_out_of_range() -> None:
    with pytest.raises(LangError) as err:
        parse("BEGIN { @x = $" + "9" * 5000 + "; }")
    assert err.value.message.startswith("param $999") and \
        err.value.message.endswith("is out of integer range [1, 9223372036854775807]")


def test_many_errors_on_one_long_line_take_memory_linear_in_their_number() -> None:
    n = 8000                            # errors, on a line of 16 KB
    text = "BEGIN { " + "` " * n + "}"
    tracemalloc.start()
    try:
        with pytest.raises(LangError) as err:
            parse(text)
        shown = str(err.value)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(err.value.diagnostics) == n
    # each error shows a window of the line, not the whole line (which made
    # the text, and the memory, grow as errors x line length: 256 MB here)
    assert len(shown) < n * 1000
    assert peak < 40 * 2 ** 20, peak


def test_a_long_line_is_shown_as_a_window_with_the_caret_under_the_error() -> None:
    text = "BEGIN { " + "x" * 1000 + " ` " + "y" * 1000 + " }"
    with pytest.raises(LangError) as err:
        parse(text)
    first = str(err.value).split("\n")[:3]
    assert first[0] == "stdin:1:1010-1011: ERROR: invalid character '`'"
    assert first[1].startswith("...x") and first[1].endswith("y...")
    assert first[2].index("~") == first[1].index("`") and first[2].strip() == "~"


def test_a_short_line_is_shown_whole_as_bpftrace_shows_it() -> None:
    with pytest.raises(LangError) as err:
        parse("BEGIN { ` }")
    assert str(err.value) == "stdin:1:9-10: ERROR: invalid character '`'\nBEGIN { ` }\n        ~"


@pytest.mark.parametrize("expr", ["!" * 2000 + "1", "(" * 500 + "1" + ")" * 500,
                                  "1 + " * 2000 + "1", "(uint8)" * 2000 + "1",
                                  "args.a" + ".a" * 2000, "- " * 3000 + "1",
                                  "1 ? " * 1000 + "1" + " : 2" * 1000])
def test_deep_nesting_is_a_lang_error_with_a_position(expr: str) -> None:
    with pytest.raises(LangError) as err:
        lang.compile(f"BEGIN {{ @x = {expr}; }}").show()
    assert "nested too deeply" in err.value.message
    assert err.value.pos is not None and err.value.pos.line == 1
