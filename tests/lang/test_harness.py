"""The comparison harness itself: what it treats as equal and what not."""
from __future__ import annotations

from .harness import _clean, normalize


def test_ties_are_sorted_and_nothing_else():
    a = "@c[b]: 1\n@c[a]: 1\n@c[z]: 2\n@d[y]: 2\n"
    b = "@c[a]: 1\n@c[b]: 1\n@c[z]: 2\n@d[y]: 2\n"
    assert normalize(a) == normalize(b)
    # a different order of different values is a difference
    assert normalize("@c[z]: 2\n@c[a]: 1\n") != normalize("@c[a]: 1\n@c[z]: 2\n")
    # printf lines keep their order
    assert normalize("x\ny\n") != normalize("y\nx\n")


def test_json_ties_sorted():
    a = '{"type": "map", "data": {"@c": {"2,abc": 1, "1,x": 1}}}'
    b = '{"type": "map", "data": {"@c": {"1,x": 1, "2,abc": 1}}}'
    assert normalize(a) == normalize(b)
    assert normalize(a) != normalize('{"type": "map", "data": {"@c": {"1,x": 2, "2,abc": 1}}}')


def test_attaching_line_and_workload_output_dropped():
    assert _clean("Attaching 3 probes...\nhi\ndone 42\n") == "hi\n"
    assert _clean("Attaching 1 probe...\n") == ""
