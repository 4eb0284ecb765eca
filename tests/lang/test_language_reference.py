"""docs/reference/language.md names everything the language knows, so it
cannot fall behind pyebpf.lang's own tables: every probe kind (and its short
form), builtin and function the lexer and parser know, every option of
``pyebpf bt``'s usage text, and the functions pyebpf refuses, listed as such."""
from __future__ import annotations

import pathlib
import re

from pyebpf.cli.btopts import USAGE
from pyebpf.lang.lexer import BUILTINS, CALL_BUILTINS, CALLS
from pyebpf.lang.parser import PROVIDERS
from pyebpf.lang.sema_base import _KNOWN_FUNCS

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "language.md"


def _named(text: str) -> set[str]:
    """The words of the page's code spans (`printf(FMT, ...)` names printf)."""
    words: set[str] = set()
    for span in re.findall(r"`([^`]+)`", text):
        words.update(re.findall(r"[A-Za-z_][\w-]*", span))
    return words


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_probe_kind_and_short_form_is_named() -> None:
    probes = _named(_section(PAGE.read_text(), "Probes"))
    missing = sorted(n for pair in PROVIDERS.items() for n in pair if n not in probes)
    assert not missing, f"docs/reference/language.md's Probes table lacks {missing}"
    assert {"BEGIN", "END"} <= probes


def test_every_builtin_is_named() -> None:
    text = _section(PAGE.read_text(), "Builtins")
    named = _named(text)
    # arg0..arg9 and sarg0..sarg9 are written as ranges
    ranged = {n for n in BUILTINS if re.fullmatch(r"s?arg\d", n)}
    assert "`arg0` ... `arg9`" in text and "`sarg0` ... `sarg9`" in text
    missing = sorted((BUILTINS - ranged | CALL_BUILTINS) - named)
    assert not missing, f"docs/reference/language.md's Builtins table lacks {missing}"


def test_every_function_is_named_and_the_refused_ones_are_listed() -> None:
    text = PAGE.read_text()
    supported = _named(_section(text, "Functions").split("Not supported", 1)[0]) | \
        _named(_section(text, "Map functions"))
    refused = _named(_section(text, "Functions").split("Not supported", 1)[1])
    missing = sorted((_KNOWN_FUNCS - CALL_BUILTINS) - supported)
    assert not missing, f"docs/reference/language.md's Functions tables lack {missing}"
    unsupported = CALLS - _KNOWN_FUNCS
    assert unsupported, "pyebpf.lang now knows every bpftrace function: update the page"
    assert sorted(unsupported - refused) == [], "list the refused functions as such"
    assert not (unsupported & supported), "a refused function is listed as supported"


def test_every_bt_option_is_named() -> None:
    options = set(re.findall(r"^ {4}(-{1,2}[\w-]+)(?:, (-{1,2}[\w-]+))?", USAGE, flags=re.M))
    flat = {o for pair in options for o in pair if o}
    table = _section(PAGE.read_text(), "Options")
    missing = sorted(o for o in flat if f"`{o}" not in table)
    assert not missing, f"docs/reference/language.md's Options table lacks {missing}"


def test_the_five_suite_failures_are_named() -> None:
    text = _section(PAGE.read_text(), "Differences from bpftrace 0.17")
    rows = re.findall(r"^\| `([\w-]+)` \| `([^`]+)` \|", text, flags=re.M)
    assert len(rows) == 5, rows
