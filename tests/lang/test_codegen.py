"""Code generation against the real kernel: scripts whose BEGIN computes
values into maps, read back through the API (``BtRun.maps``), so every
construct is checked for what the kernel computes, not for the
instructions chosen."""
from __future__ import annotations

import pytest

from pyebpf import lang

# (each test that needs the kernel is marked `kernel`; the others run under every Python)


def run_begin(body: str) -> dict:
    """The maps after ``BEGIN { body }`` has run."""
    prog = lang.compile("BEGIN { " + body + " }")
    with prog.start() as run:
        run.stop()
        return run.maps()


@pytest.mark.kernel
@pytest.mark.parametrize("expr, value", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("10 - 3 - 2", 5), ("17 / 5", 3), ("17 % 5", 2),
    ("1 << 10", 1024), ("1024 >> 3", 128), ("6 & 3", 2), ("6 | 3", 7), ("6 ^ 3", 5),
    ("~0 & 0xff", 255), ("-(3 - 10)", 7), ("!0", 1), ("!5", 0),
    ("3 > 2", 1), ("3 < 2", 0), ("2 <= 2", 1), ("2 >= 3", 0), ("2 == 2", 1), ("2 != 2", 0),
    ("1 && 0", 0), ("1 || 0", 1), ("0 || 0", 0), ("2 && 3", 1),
    ("5 > 3 ? 10 : 20", 10), ("5 < 3 ? 10 : 20", 20),
    ("(int8)300", 44), ("(uint8)-1", 255), ("(int16)65535", -1), ("(uint32)-1", 4294967295),
    ("0x100000000 + 1", 4294967297), ("-5 < 3", 1),
])
def test_integer_expressions(expr: str, value: int) -> None:
    assert run_begin(f"@x = {expr};")["@x"] == value


@pytest.mark.kernel
def test_nested_expression_deeper_than_the_registers() -> None:
    e = "((1 + (2 * (3 + (4 * (5 + (6 * 7)))))) + ((8 + 9) * (10 + 11)))"
    assert run_begin(f"@x = {e};")["@x"] == eval(e)


@pytest.mark.kernel
def test_scratch_variables_and_compound_assignments() -> None:
    maps = run_begin("$a = 5; $a += 3; $a *= 2; $b = $a; $b--; ++$b; $b++; @x = $a; @y = $b;")
    assert maps["@x"] == 16 and maps["@y"] == 17


@pytest.mark.kernel
def test_map_compound_assignment_and_increments() -> None:
    maps = run_begin("@t = 7; @t += 2; @t++; ++@t; @t -= 1; @k[3] = 1; @k[3]++; @k[4]++;")
    assert maps["@t"] == 10
    assert maps["@k"] == {3: 2, 4: 1}


@pytest.mark.kernel
def test_if_else_and_else_if() -> None:
    maps = run_begin("$v = 7; if ($v > 10) { @x = 1; } else if ($v > 5) { @x = 2; } "
                     "else { @x = 3; } if ($v == 7) { @y = 1; }")
    assert maps["@x"] == 2 and maps["@y"] == 1


@pytest.mark.kernel
def test_while_and_unroll() -> None:
    maps = run_begin("$i = 0; while ($i < 5) { $i++; @w = count(); } "
                     "unroll(3) { @u = count(); } @i = $i;")
    assert maps["@w"] == 5 and maps["@u"] == 3 and maps["@i"] == 5


@pytest.mark.kernel
def test_return_stops_the_probe() -> None:
    maps = run_begin("@a = 1; return; @b = 2;")
    assert maps == {"@a": 1}


@pytest.mark.kernel
def test_aggregations() -> None:
    maps = run_begin("@c = count(); @c = count(); @s = sum(-5); @s = sum(2); "
                     "@mx = max(3); @mx = max(9); @mx = max(-1); @mn = min(4); @mn = min(-2); "
                     "@a = avg(4); @a = avg(7); @st = stats(10); @st = stats(20); "
                     "@h = hist(5); @h = hist(0); @h = hist(-1); @l = lhist(5, 0, 10, 2); "
                     "@l = lhist(50, 0, 10, 2);")
    assert maps["@c"] == 2
    assert maps["@s"] == -3
    assert maps["@mx"] == 9 and maps["@mn"] == -2
    assert maps["@a"] == 5
    assert maps["@st"] == (2, 15, 30)
    assert maps["@h"] == {(None, 0): 1, (0, 1): 1, (4, 8): 1}
    assert maps["@l"] == {(4, 6): 1, (10, None): 1}


@pytest.mark.kernel
def test_keys_of_several_types() -> None:
    maps = run_begin('@x[1, "a"] = count(); @x[1, "a"] = count(); @x[2, "bc"] = count(); '
                     '@s["k"] = "value"; @n[-3] = 1;')
    assert maps["@x"] == {(1, "a"): 2, (2, "bc"): 1}
    assert maps["@s"] == {"k": "value"}
    assert maps["@n"] == {-3: 1}


@pytest.mark.kernel
def test_delete() -> None:
    maps = run_begin("@k[1] = 1; @k[2] = 2; delete(@k[1]); @c[5] = count(); delete(@c[5]);")
    assert maps["@k"] == {2: 2}
    assert maps["@c"] == {}


@pytest.mark.kernel
def test_strings_compare() -> None:
    maps = run_begin('$s = "abc"; @eq = $s == "abc"; @ne = $s != "abc"; @pre = $s == "ab"; '
                     '@long = $s == "abcd"; $t = "abc"; @vv = $s == $t; '
                     '@cmp = "abc" == "abc" ? 1 : 2; @c = comm == "python3" || 1;')
    assert maps["@eq"] == 1 and maps["@ne"] == 0
    assert maps["@pre"] == 0 and maps["@long"] == 0
    assert maps["@vv"] == 1 and maps["@cmp"] == 1


@pytest.mark.kernel
def test_builtins_in_begin_are_this_process() -> None:
    import os
    maps = run_begin("@pid = pid; @tid = tid; @uid = uid; @comm = comm;")
    assert maps["@pid"] == os.getpid()
    assert maps["@uid"] == os.getuid()
    assert maps["@comm"] == open("/proc/self/comm").read().strip()


@pytest.mark.kernel
def test_events_in_order() -> None:
    prog = lang.compile('BEGIN { printf("a %d\\n", 1); printf("b %s\\n", "x"); exit(); '
                        'printf("never\\n"); }')
    with prog.start() as run:
        events = list(run)
    assert [e.kind for e in events] == ["printf", "printf", "exit"]
    assert [e.values for e in events[:2]] == [(1,), ("x",)]


def test_show_program_comments_each_line() -> None:
    prog = lang.compile("BEGIN {\n  @x = count();\n  printf(\"hi\\n\");\n}\n")
    text = prog.show()
    assert "stdin:2: @x = count();" in text
    assert 'stdin:3: printf("hi\\n");' in text
    assert "; probe BEGIN" in text


@pytest.mark.kernel
def test_strncmp() -> None:
    maps = run_begin('$s = "abcdef"; @a = strncmp($s, "abcxyz", 3); @b = strncmp($s, "abd", 3); '
                     '@c = strncmp("ab", $s, 2); @d = strncmp($s, "abc", 10);')
    assert maps["@a"] == 0 and maps["@b"] == 1 and maps["@c"] == 0 and maps["@d"] == 1



@pytest.mark.kernel
@pytest.mark.parametrize("cond, taken", [
    ("1 < 2 && 3 < 4", 1), ("1 < 2 && 3 > 4", 0), ("1 > 2 || 3 < 4", 1), ("1 > 2 || 3 > 4", 0),
    ("!(1 > 2)", 1), ("!(1 < 2 && 2 < 3)", 0), ("(1 > 2 || 2 > 1) && !(0)", 1),
    ("-1 < 0", 1), ("(uint64)-1 < 0", 0), ("$v == 7 && $v != 8", 1),
])
def test_conditions_jump_without_a_value(cond: str, taken: int) -> None:
    maps = run_begin(f"$v = 7; @x = 0; if ({cond}) {{ @x = 1; }} "
                     f"$i = 0; while ({cond} && $i < 3) {{ $i++; }} @i = $i; "
                     f"@t = {cond} ? 1 : 0;")
    assert maps["@x"] == taken
    assert maps["@i"] == 3 * taken
    assert maps["@t"] == taken


@pytest.mark.kernel
def test_clear_and_zero_of_every_kind() -> None:
    prog = lang.compile("BEGIN { @h = hist(5); @l = lhist(3, 0, 10, 2); @c = count(); "
                        "@k[1] = hist(3); @v[2] = 7; @s = stats(4); "
                        "clear(@h); clear(@l); zero(@c); clear(@k); zero(@v); zero(@s); }")
    with prog.start() as run:
        run.stop()
        list(run.poll(0))
        maps = run.maps()
    assert "@h" not in maps and "@l" not in maps and maps["@k"] == {}
    assert maps["@c"] == 0 and maps["@v"] == {2: 0}


def test_a_statement_over_the_stack_limit_points_at_the_script() -> None:
    from pyebpf.lang.errors import LangError
    keys = ", ".join(["str(0)"] * 8)             # a 512-byte key, and its value
    prog = lang.compile("BEGIN {\n  @x[" + keys + "] = 1;\n}")
    with pytest.raises(LangError) as err:
        prog.generate()
    assert "stdin:2:" in str(err.value) and "512" in str(err.value)


@pytest.mark.kernel
def test_scratch_variables_keep_their_slots_across_statements() -> None:
    # the temporaries of each statement reuse the stack; variables must not
    maps = run_begin('$a = "first"; $n = 7; @k["x", "y", "z"] = 1; @k["p", "q", "r"] = 2; '
                     '$b = "second"; @s = $a; @t = $b; @n = $n;')
    assert maps["@s"] == "first" and maps["@t"] == "second" and maps["@n"] == 7
