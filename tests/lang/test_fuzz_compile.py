"""Fuzzing the whole front end: random and mutated programs (with random
positional parameters) through :func:`pyebpf.lang.compile` and
:meth:`~pyebpf.lang.api.BtProgram.show`. The property: a program is
compiled and shown, or refused with a :class:`~pyebpf.errors.PyebpfError`
(a LangError pointing at the script); nothing else escapes -- no
RecursionError, no ValueError of a conversion, no internal error
(issue 24). The budgets are in ``tests/budget.py``."""
from __future__ import annotations

import random

from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf import lang
from pyebpf.errors import PyebpfError
from pyebpf.lang.errors import LangError

#: valid programs the mutations start from (no probe that needs a file)
SEEDS = [
    'BEGIN { @x = strncmp(comm, "abc", 0); exit() }',
    'BEGIN { printf("%d %s %x\\n", $1, str($2), $#); @s[str($1)] = count(); exit() }',
    'interval:ms:$1 { @n++; if (@n > 2) { exit() } }',
    'BEGIN { $i = 0; while ($i < 5) { $i++; if ($i == 3) { continue } @h = hist($i); } '
    'unroll(3) { @u += 1 } }',
    'BEGIN { @a = 1 ? 2 : 3; @b = 0 && pid; @c = !(1 || 0); @t = (1, "two", 3); '
    '@l = lhist(5, 0, 10, 1); print(@t); delete(@a); clear(@b); zero(@c); exit() }',
    'END { printf("%s %d\\n", str($1 + 1), (int8)-1); @m[pid, tid] = max(nsecs); }',
    'interval:ms:1 { $s = "abc"; if ($s == "abc") { @eq = 1 } else { @ne = 1 } '
    '@x = buf(nsecs, 2); @j = ksym(0); @st = stats(1); @av = avg(2); @mi = min(3); }',
    'i:s:1 { @c[cpu] = sum(1 << 3); @d = (uint16)0xffff + 1 * 3 / 2 % 5 - -1; exit() }',
]

PIECES = ["BEGIN", "END", "interval:ms:1", "i:s:$1", "BEG$1", "{", "}", "(", ")", "[", "]",
          ";", ",", "/", "*", "+", "-", "!", "~", "&&", "||", "?", ":", "=", "==", "+=",
          "++", "--", "<<", ">>", "$1", "$2", "$#", "$0", "$x", "@", "@m", "@m[1]", "0",
          "1", "-1", "0x" + "f" * 20, "9" * 30, "9" * 5000, "1e3", "1_000", '"s"', '"\\x41"', "comm",
          "pid", "nsecs", "args", "arg0", "retval", "str(", "strncmp(", "printf(", "count()",
          "hist(", "lhist(", "if", "else", "while", "unroll", "return", "break", "continue",
          "exit()", "(int8)", "(uint64)", "sizeof(", "buf(", "kaddr(", "print(", "delete(",
          ".", "->", "\n", " ", "//", "/*", "*/", "`", "\\", "\u0663", "\0"]

#: parameters: numbers bpftrace reads, numbers it refuses, text
PARAMS = st.lists(st.sampled_from(["1", "3", "0", "-1", "010", "0x10", "", " 7", "abc", "IN",
                                   "0x1ffffffffffffffff", "18446744073709551616", "\u0663",
                                   "1_000", "9" * 5000, "ms", "hello world"]) | st.text(max_size=8),
                  max_size=3)


def _compile_and_show(text: str, params: list[str]) -> None:
    try:
        lang.compile(text, params=params).show()
    except LangError as exc:
        assert exc.diagnostics and str(exc).count("ERROR:") >= 1
    except PyebpfError:
        pass


def _mutate(text: str, rng: random.Random, edits: int) -> str:
    for _ in range(edits):
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.randrange(8))
        how = rng.randrange(4)
        if how == 0:                        # delete a slice
            text = text[:i] + text[j:]
        elif how == 1:                      # duplicate a slice
            text = text[:j] + text[i:j] + text[j:]
        elif how == 2:                      # insert a piece
            text = text[:i] + rng.choice(PIECES) + text[i:]
        else:                               # replace a slice with a piece
            text = text[:i] + rng.choice(PIECES) + text[j:]
    return text


@fuzz_settings(300)
@given(st.sampled_from(SEEDS), st.integers(0, 2 ** 32), st.integers(1, 6), PARAMS)
def test_property_mutated_programs_compile_or_give_a_pyebpf_error(seed, rnd, edits, params):
    _compile_and_show(_mutate(seed, random.Random(rnd), edits), params)


#: random integer expressions and statements over the language's pieces
_ATOMS = st.sampled_from(["1", "0", "-5", "0x10", "$1", "$2", "$#", "pid", "nsecs", "@m",
                          "@k[1]", "$v", "cpu", 'strncmp(comm, "ab", $1)',
                          'strncmp(str($1), str($2 + 1), 2)', "(int8)300", "9223372036854775807"])
_EXPRS = st.recursive(_ATOMS, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&",
                                      "||", "&", "|", "^", "<<", ">>"]), inner).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"),
    st.tuples(st.sampled_from(["!", "-", "~", "(uint8)", "(int32)"]), inner).map(
        lambda t: f"{t[0]}({t[1]})"),
    st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
), max_leaves=12)
_STRINGS = st.sampled_from(['"lit"', "str($1)", "str($2)", "comm", 'str($1 + 1)'])
_STMTS = st.recursive(st.one_of(
    _EXPRS.map(lambda e: f"@m = {e};"), _EXPRS.map(lambda e: f"$v = {e};"),
    _EXPRS.map(lambda e: f"@k[{e}] = count();"), _EXPRS.map(lambda e: f'printf("%d\\n", {e});'),
    st.tuples(_STRINGS, _EXPRS).map(lambda t: f'@s[{t[0]}] = {t[1]}; printf("%s\\n", {t[0]});'),
    st.just("exit();"), st.just("return;")),
    lambda inner: st.one_of(
        st.tuples(_EXPRS, st.lists(inner, max_size=3), st.lists(inner, max_size=2)).map(
            lambda t: f"if ({t[0]}) {{ {' '.join(t[1])} }} else {{ {' '.join(t[2])} }}"),
        st.tuples(st.sampled_from(["1", "2", "$1"]), st.lists(inner, max_size=2)).map(
            lambda t: f"unroll({t[0]}) {{ {' '.join(t[1])} }}"),
        st.tuples(_EXPRS, st.lists(inner, max_size=2)).map(
            lambda t: f"while ({t[0]}) {{ {' '.join(t[1])} break; }}")),
    max_leaves=6)


@fuzz_settings(200)
@given(st.sampled_from(["BEGIN", "END", "interval:ms:1", "BEGIN /$1/"]),
       st.lists(_STMTS, max_size=5), PARAMS)
def test_property_random_programs_compile_or_give_a_pyebpf_error(probe, stmts, params):
    _compile_and_show(f"{probe} {{ $v = 1; {' '.join(stmts)} }}", params)


@fuzz_settings(200)
@given(st.lists(st.sampled_from(PIECES), max_size=30), st.lists(st.booleans(), max_size=30),
       PARAMS)
def test_property_token_soup_compiles_or_gives_a_pyebpf_error(pieces, gaps, params):
    text = "".join(p + (" " if g else "") for p, g in zip(pieces, gaps + [True] * 30))
    _compile_and_show(text, params)
