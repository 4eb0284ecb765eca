"""The drawing half of pyebpf.profile: pure functions of plain data."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget import fuzz_settings
from pyebpf.errors import OptionError, PyebpfError
from pyebpf.profile import (flamegraph_svg, folded_text, histogram_svg, parse_folded,
                            speedscope_json, write_histogram, write_profile)
from pyebpf.draw import output as output_mod
from pyebpf.draw.flamegraph import PAD, WIDTH, escape_xml, layout
from pyebpf.draw.render import log2_label, linear_label
from pyebpf.draw.speedscope import SCHEMA

from .conftest import SVG, svg_frames

SHAPE = {("main", "work", "hot"): 300, ("main", "work", "cold"): 100,
         ("main", "other", "leaf"): 100}

names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=";\n\r"),
                min_size=1, max_size=12).filter(lambda s: s.strip() == s and " " not in s[-1:])
stack_maps = st.dictionaries(st.tuples(names) | st.lists(names, min_size=1, max_size=6).map(tuple),
                             st.integers(1, 10**6), max_size=30)


# ------------------------------------------------------------------ folded
def test_folded_lines():
    assert folded_text(SHAPE) == ("main;other;leaf 100\nmain;work;cold 100\n"
                                  "main;work;hot 300\n")


def test_folded_frame_names_cannot_break_lines():
    text = folded_text({("a;b", "c\nd"): 2})
    assert text == "a:b;c d 2\n"
    assert parse_folded(text) == {("a:b", "c d"): 2}


@fuzz_settings(200)
@given(stack_maps)
def test_folded_round_trip(stacks):
    assert parse_folded(folded_text(stacks)) == stacks


@pytest.mark.parametrize("line", ["main;work", "main;work x", "main -3", " 12"])
def test_bad_folded_lines_name_the_line(line):
    with pytest.raises(OptionError, match="line 2"):
        parse_folded("a;b 1\n" + line + "\n")


# ------------------------------------------------------------------ flame graph
def test_layout_places_children_inside_their_parents():
    frames, total = layout(SHAPE)
    assert total == 500
    by_name = {f[5]: f for f in frames}
    assert by_name["all"][2:5] == (0, 0, 500)
    assert by_name["work"][4] == 400 and by_name["other"][4] == 100
    hot, work = by_name["hot"], by_name["work"]
    assert hot[1] == work[0] and work[3] <= hot[3] and hot[3] + hot[4] <= work[3] + work[4]


def test_svg_widths_follow_the_samples():
    frames = svg_frames(flamegraph_svg(SHAPE))
    full = WIDTH - 2 * PAD
    assert frames[("all",)] == pytest.approx(full, abs=0.01)
    assert frames[("all", "main", "work", "hot")] == pytest.approx(full * 0.6, abs=0.01)
    assert frames[("all", "main", "work", "cold")] == pytest.approx(full * 0.2, abs=0.01)
    assert frames[("all", "main", "other")] == pytest.approx(full * 0.2, abs=0.01)


def test_svg_titles_give_samples_and_percentage():
    root = ET.fromstring(flamegraph_svg(SHAPE, "T", subtitle="S").encode())
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert "hot (300 samples, 60.00%)" in titles and "all (500 samples, 100.00%)" in titles
    assert root.find(f"{SVG}script") is not None          # the viewer is inside
    assert "http" not in "".join(s.text or "" for s in root.iter(f"{SVG}script"))


def test_svg_escapes_names():
    weird = ("<script>alert(1)</script>", 'a"b&c', "std::vector<int>::push_back(int const&)")
    text = flamegraph_svg({weird: 3})
    frames = svg_frames(text)                              # well-formed XML
    assert ("all",) + weird in frames
    assert "<script>alert" not in text


def test_svg_holds_any_name():
    names = ("\x08bell", "nul\x00", "lone\udc80surrogate", "\ufffe")
    text = flamegraph_svg({names: 1})
    text.encode("utf-8")                                   # (a file can hold it)
    assert len(svg_frames(text)) == 5


def test_svg_of_nothing():
    text = flamegraph_svg({})
    assert "no samples" in text and svg_frames(text) == {}


@fuzz_settings(100)
@given(stack_maps)
def test_svg_is_well_formed_and_proportional(stacks):
    frames = svg_frames(flamegraph_svg(stacks))
    total = sum(stacks.values())
    if not total:
        return
    full = WIDTH - 2 * PAD
    shown: dict = {}                # as drawn: characters XML cannot hold are U+FFFD
    for k, v in stacks.items():
        if v * full / total < 0.1:
            continue                # (not drawn, even where its name merges with another's)
        k = tuple(escape_xml(n).replace("&lt;", "<").replace("&gt;", ">").replace(
            "&quot;", '"').replace("&amp;", "&") for n in k)
        shown[k] = shown.get(k, 0) + v
    stacks = shown
    for stack, count in stacks.items():
        drawn = frames.get(("all",) + stack)
        if count * full / total >= 0.1:                    # (narrower ones are left out)
            assert drawn is not None and drawn >= count * full / total - 0.01


# ------------------------------------------------------------------ speedscope
def check_speedscope(doc: dict) -> None:
    """The required fields of https://www.speedscope.app/file-format-schema.json
    (File: $schema, shared.frames, profiles; SampledProfile: type, name, unit,
    startValue, endValue, samples, weights; Frame: name)."""
    assert doc["$schema"] == SCHEMA
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    assert doc["profiles"]
    for p in doc["profiles"]:
        assert p["type"] == "sampled" and isinstance(p["name"], str)
        assert p["unit"] in ("none", "nanoseconds", "microseconds", "milliseconds",
                             "seconds", "bytes")
        assert isinstance(p["startValue"], (int, float)) and p["endValue"] >= p["startValue"]
        assert len(p["samples"]) == len(p["weights"])
        assert all(0 <= i < len(frames) for s in p["samples"] for i in s)
    assert 0 <= doc.get("activeProfileIndex", 0) < len(doc["profiles"])


def speedscope_stacks(doc: dict) -> dict:
    names = [f["name"] for f in doc["shared"]["frames"]]
    p = doc["profiles"][0]
    return {tuple(names[i] for i in s): w for s, w in zip(p["samples"], p["weights"])}


def test_speedscope_document():
    doc = json.loads(speedscope_json(SHAPE, "shapes"))
    check_speedscope(doc)
    assert doc["profiles"][0]["endValue"] == 500
    assert len(doc["shared"]["frames"]) == 6              # each name once
    assert speedscope_stacks(doc) == SHAPE


@fuzz_settings(100)
@given(stack_maps)
def test_speedscope_round_trip(stacks):
    doc = json.loads(speedscope_json(stacks))
    check_speedscope(doc)
    assert speedscope_stacks(doc) == stacks


# ------------------------------------------------------------------ histograms
def bars(text: str) -> list[tuple[str, int, float]]:
    root = ET.fromstring(text.encode())
    out = []
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "bar":
            label = g.findall(f"{SVG}text")[0].text
            out.append((label, int(g.get("data-count")), float(g.find(f"{SVG}rect").get("width"))))
    return out


def test_log2_histogram_labels_as_bpftrace():
    hist = {4: 4, 6: 8, 12: 2}                  # buckets [4, 8), [16, 32), [1K, 2K)
    got = bars(histogram_svg(hist, "latency", unit="usecs"))
    assert [b[0] for b in got] == [log2_label(b) for b in range(4, 13)]
    assert got[0][0] == "[4, 8)" and got[-1][0] == "[1K, 2K)"
    counts = [b[1] for b in got]
    assert counts == [4, 0, 8, 0, 0, 0, 0, 0, 2]
    widths = {b[0]: b[2] for b in got}
    assert widths["[4, 8)"] == pytest.approx(widths["[16, 32)"] / 2)
    assert widths["[64, 128)"] == 0


def test_linear_histogram_labels():
    got = bars(histogram_svg({0: 1, 1: 3}, label=lambda b: linear_label(b * 10, b * 10 + 10)))
    assert [b[0] for b in got] == ["[0, 10)", "[10, 20)"]


def test_empty_histogram():
    assert "no data" in histogram_svg({}) and bars(histogram_svg({1: 0})) == []


# ------------------------------------------------------------------ writing
@pytest.mark.parametrize("ext, check", [
    (".svg", lambda t: svg_frames(t)[("all", "main", "work", "hot")] > 0),
    (".folded", lambda t: parse_folded(t) == SHAPE),
    (".json", lambda t: speedscope_stacks(json.loads(t)) == SHAPE),
])
def test_write_profile_by_extension(tmp_path, ext, check):
    path = str(tmp_path / f"p{ext}")
    write_profile(SHAPE, path)
    assert check(open(path).read())
    assert os.listdir(tmp_path) == [f"p{ext}"]            # no temporary file left


def test_unknown_extension(tmp_path):
    with pytest.raises(OptionError, match="unknown output format '.png'"):
        write_profile(SHAPE, str(tmp_path / "p.png"))
    assert os.listdir(tmp_path) == []


def test_a_drawing_error_keeps_the_data(tmp_path, monkeypatch):
    def broken(*a, **k):
        raise ZeroDivisionError("boom")
    monkeypatch.setattr("pyebpf.draw.flamegraph.flamegraph_svg", broken)
    path = tmp_path / "p.svg"
    path.write_text("old picture")
    with pytest.raises(output_mod.ProfileWriteError, match="boom") as info:
        write_profile(SHAPE, str(path))
    assert isinstance(info.value, PyebpfError)
    assert info.value.saved == str(path) + ".folded"
    assert parse_folded(open(info.value.saved).read()) == SHAPE
    assert path.read_text() == "old picture"              # not half-written


def test_a_chart_error_keeps_the_counts(tmp_path):
    def bad_label(b):
        raise KeyError(b)
    path = tmp_path / "h.svg"
    with pytest.raises(output_mod.ProfileWriteError) as info:
        write_histogram({3: 4, 5: 1}, str(path), label=bad_label)
    assert open(info.value.saved).read() == "3 4\n5 1\n"
    write_histogram({3: 4, 5: 1}, str(path))
    assert [b[1] for b in bars(path.read_text())] == [4, 0, 1]


def test_drawing_profiles_does_not_load_the_kernel_layers():
    """(A histogram's labels come from pyebpf.draw.render, whose package
    imports the map layer: charts are left out here.)"""
    import subprocess
    import sys
    code = ("import sys, pyebpf.profile as p\n"
            "p.write_profile({('a', 'b'): 1}, sys.argv[1])\n"
            "p.write_profile({('a', 'b'): 1}, sys.argv[2])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('pyebpf.kernel', "
            "'pyebpf.maps', 'pyebpf.attach', 'pyebpf.loader', 'cffi'))))\n")
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", code, f"{d}/a.svg", f"{d}/a.json"],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "[]", out.stdout
