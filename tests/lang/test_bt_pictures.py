"""``pyebpf bt --flamegraph`` and ``--plot``: the maps drawn at the end, the
text printed as usual."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .harness import ROOT, bt_workload

pytestmark = pytest.mark.kernel

TRYLOCK = ("uretprobe:libc:pthread_mutex_trylock /retval != 0 && pid == cpid/ { "
           "@fail[ustack] = count(); }")


@pytest.fixture(scope="module")
def w() -> str:
    return bt_workload()


def _bt(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pyebpf", "bt", *args], capture_output=True,
                          text=True, cwd=str(ROOT), env=env, timeout=120)


def _frames(svg: str) -> set[str]:
    return set(re.findall(r"<title>([^<(]+?) \(", svg))


def test_trylock_failures_by_stack_as_a_flame_graph(w, tmp_path):
    out = tmp_path / "fail.svg"
    proc = _bt("-e", TRYLOCK, "-c", f"{w} 20 100", "--flamegraph", str(out))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^\]: 10$", proc.stdout, re.M) and re.search(r"^\]: 4$", proc.stdout, re.M)
    svg = out.read_text()
    for path in (["try_take", "lock_a", "main"], ["lock_b_inner", "lock_b", "main"]):
        for frame in path:
            assert re.search(rf"<title>{frame}\+\d+ ", svg), (frame, svg[:2000])
    assert f"wrote {out}" in proc.stderr


def test_other_keys_are_the_root_frames_and_several_maps_get_a_file_each(w, tmp_path):
    program = TRYLOCK.replace("}", "@by[comm, ustack(2)] = count(); }")
    proc = _bt("-e", program, "-c", f"{w} 20 100", "--flamegraph", str(tmp_path / "g.svg"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["g-by.svg", "g-fail.svg"]
    by = (tmp_path / "g-by.svg").read_text()
    assert re.search(r"<title>btworkload \(14 ", by), by[:3000]      # comm, every failure
    folded = tmp_path / "g.folded"
    proc = _bt("-e", TRYLOCK, "-c", f"{w} 20 100", "--flamegraph", str(folded))
    lines = sorted(folded.read_text().splitlines())
    assert [ln.rsplit(" ", 1)[1] for ln in lines] == ["10", "4"]
    assert lines[0].split(";")[-3:][0].startswith("main+")


def test_histograms_plotted_one_chart_per_key(w, tmp_path):
    program = (f"uprobe:{w}:compute {{ @h[arg0 % 2] = hist(arg1); @l = lhist(arg0, 0, 10, 2); }}")
    proc = _bt("-e", program, "-c", f"{w} 20 1", "--plot", str(tmp_path / "p.svg"))
    assert proc.returncode == 0, proc.stderr
    assert "@l: \n[0, 2)" in proc.stdout                      # the text as usual
    assert sorted(os.listdir(tmp_path)) == ["p-h-0.svg", "p-h-1.svg", "p-l.svg"]
    chart = (tmp_path / "p-l.svg").read_text()
    assert 'data-total="20"' in chart and "[8, 10)" in chart


def test_a_picture_file_of_unknown_kind_is_refused_before_tracing(tmp_path):
    proc = _bt("-e", "BEGIN { exit(); }", "--flamegraph", str(tmp_path / "x.png"))
    assert proc.returncode == 2 and "--flamegraph" in proc.stderr and "Traceback" not in proc.stderr
    proc = _bt("-e", "BEGIN { exit(); }", "--plot", str(tmp_path / "x.txt"))
    assert proc.returncode == 2 and "SVG" in proc.stderr


def test_a_drawing_error_keeps_the_data(w, tmp_path, monkeypatch):
    """The flame graph's drawing fails: the text was printed and the stacks
    are saved as folded text beside the file."""
    from pyebpf.draw.output import ProfileWriteError
    from pyebpf.lang import compile as bt_compile
    from pyebpf.lang import pictures
    import pyebpf.draw.flamegraph as fg

    def broken(*a, **k):
        raise RuntimeError("no drawing today")
    monkeypatch.setattr(fg, "flamegraph_svg", broken)
    prog = bt_compile(TRYLOCK)
    with prog.start([w, "20", "100"]) as run:
        run.child.wait()
        run.stop()
        with pytest.raises(ProfileWriteError, match="fail.svg.folded"):
            pictures.write_flamegraphs(run, str(tmp_path / "fail.svg"))
    lines = sorted((tmp_path / "fail.svg.folded").read_text().splitlines())
    assert [ln.rsplit(" ", 1)[1] for ln in lines] == ["10", "4"]
