"""Conditions the generator folds (a constant length, a constant
condition, a jump that ends a block) leave no dead code behind: the
kernel's verifier refuses a program with an unreachable instruction, and
bpftrace 0.17 runs these programs (issue 24, item 7)."""
from __future__ import annotations

import pytest

from .harness import compare_with_bpftrace

pytestmark = pytest.mark.kernel

FOLDED = [
    # strncmp with a length of 0 (equal without reading a byte)
    'BEGIN { @x = strncmp(comm, "abc", 0); @y = strncmp("abc", "abd", 0); '
    '@z = strncmp("abc", "abd", 3); exit() }',
    # if/else on a constant, both ways
    'BEGIN { if (0) { printf("no\\n") } else { printf("yes\\n") } '
    'if (1) { printf("one\\n") } else { printf("never\\n") } exit() }',
    # ternaries with constant conditions, integers and strings, nested
    'BEGIN { @t = 1 ? 5 : 6; @f = 0 ? 5 : 6; @s = 0 ? "a" : "b"; '
    '@n = 1 ? 2 : (0 ? 3 : 4); @c = 0 ? strncmp(comm, "abc", 2) : 1; exit() }',
    # && and || with constants
    'BEGIN { @a = 0 && pid; @b = 1 || pid; @c = (1 && 0); @d = !1; '
    'if (0 || 0) { @e = 1 } if (1 && 1) { @g = 1 } exit() }',
    # loops that never run, or stop at once
    'BEGIN { while (0) { @w = 1 } unroll(1) { @u = 1 } '
    'while (1) { break; @never = 1 } exit() }',
    'BEGIN { $i = 0; while ($i < 3) { $i++; continue; @x = 1 } @i = $i; exit() }',
    # statements after exit()/return
    'interval:ms:1 { @x = 1; exit(); return; @y = 2 }',
]


@pytest.mark.parametrize("program", FOLDED)
def test_folded_conditions_load_and_print_what_bpftrace_prints(program: str) -> None:
    compare_with_bpftrace(program)
