"""``pyebpf profile`` against the real kernel, on workloads of a known shape.

shapes.c: main -> work -> hot spins 3 units, main -> work -> cold 1 unit,
main -> other -> leaf 1 unit, in register-only loops (sampled in proportion
to their run time)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pyebpf.profile import parse_folded

from .conftest import BUILD, CFLAGS, HERE, ROOT, build, cli, svg_frames
from .test_drawing import check_speedscope, speedscope_stacks

pytestmark = pytest.mark.kernel

HZ = "499"
ROUNDS = "40"        # ~1.5 s of spinning: ~700 samples at 499 Hz


def under(stacks: dict, *path: str) -> int:
    """Samples of the stacks that pass through ``path`` (consecutive frames)."""
    n = len(path)
    return sum(c for s, c in stacks.items()
               if any(s[i:i + n] == path for i in range(len(s) - n + 1)))


def check_shape(stacks: dict, scale: float = 1.0) -> None:
    hot, cold, leaf = (under(stacks, *p) for p in
                       (("work", "hot", "spin"), ("work", "cold", "spin"), ("other", "leaf", "spin")))
    total = sum(stacks.values())
    assert cold * scale >= 40, stacks
    assert (hot + cold + leaf) >= 0.9 * total, stacks          # nearly all in the known paths
    assert 2.3 <= hot / cold <= 3.9, (hot, cold)
    assert 0.65 <= leaf / cold <= 1.5, (leaf, cold)
    assert under(stacks, "main", "work") == hot + cold


def run_ok(*args: str) -> subprocess.CompletedProcess:
    proc = cli("profile", *args)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_folded_counts_follow_the_run_times(shapes):
    proc = run_ok("-F", HZ, "-c", f"{shapes} {ROUNDS}")
    stacks = parse_folded(proc.stdout)
    check_shape(stacks)
    assert all(not s[0].startswith("shapes") for s in stacks)    # no process-name root with -c
    assert "samples" in proc.stderr and "distinct stacks" in proc.stderr


def test_flame_graph_widths_follow_the_same_proportions(shapes, tmp_path):
    out = tmp_path / "shapes.svg"
    run_ok("-F", HZ, "-c", f"{shapes} {ROUNDS}", "-o", str(out), "-q")
    frames = svg_frames(out.read_text())
    # the widths of each path, summed over where it appears (the outer frames vary)
    widths = {p: sum(w for path, w in frames.items() if path[-len(p):] == p)
              for p in (("work", "hot"), ("work", "cold"), ("other", "leaf"))}
    assert 2.3 <= widths["work", "hot"] / widths["work", "cold"] <= 3.9, widths
    assert 0.65 <= widths["other", "leaf"] / widths["work", "cold"] <= 1.5, widths
    assert sorted(os.listdir(tmp_path)) == ["shapes.svg"]


def test_speedscope_output(shapes, tmp_path):
    out = tmp_path / "shapes.json"
    run_ok("-F", HZ, "-c", f"{shapes} {ROUNDS}", "-o", str(out))
    doc = json.loads(out.read_text())
    check_speedscope(doc)
    assert doc["name"] == f"{shapes} {ROUNDS}"
    check_shape(speedscope_stacks(doc))


def test_a_running_process_for_a_duration(shapes):
    worker = subprocess.Popen([shapes, "100000"])
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        proc = run_ok("-F", HZ, "-p", str(worker.pid), "-d", "1.5")
        assert 1.4 < time.monotonic() - t0 < 30
        assert worker.poll() is None                   # -p: the process is left running
    finally:
        worker.kill()
        worker.wait()
    check_shape(parse_folded(proc.stdout), scale=2)


def test_every_process_until_ctrl_c(shapes, tmp_path):
    out = tmp_path / "all.folded"
    worker = subprocess.Popen([shapes, "100000"])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        prof = subprocess.Popen([sys.executable, "-m", "pyebpf", "profile", "-F", HZ,
                                 "-o", str(out)], env=env, stderr=subprocess.PIPE, text=True)
        line = prof.stderr.readline()
        assert line.startswith("Sampling at 499 Hz"), line
        time.sleep(1.5)
        prof.send_signal(signal.SIGINT)
        err = prof.communicate(timeout=60)[1]
        assert prof.returncode == 0, err
    finally:
        worker.kill()
        worker.wait()
    stacks = parse_folded(out.read_text())
    mine = {s[1:]: c for s, c in stacks.items() if s[0] == "shapes"}   # the process name first
    check_shape(mine, scale=2)


def test_kernel_stacks(tmp_path):
    dd = shutil.which("dd")
    proc = run_ok("-F", "999", "--kernel", "-c",
                  f"{dd} if=/dev/zero of=/dev/null bs=1M count=4000")
    stacks = parse_folded(proc.stdout)
    kernel = {s: c for s, c in stacks.items() if s[-1].endswith("_[k]")}
    assert sum(kernel.values()) >= 0.3 * sum(stacks.values()), stacks
    for s in kernel:                     # user frames first, then the kernel's, innermost last
        ks = [i for i, f in enumerate(s) if f.endswith("_[k]")]
        assert ks == list(range(ks[0], len(s)))
    assert under(kernel, "vfs_read_[k]", "read_zero_[k]") > 0, list(kernel)[:5]


def test_unknown_frames_name_their_module(shapes, tmp_path):
    stripped = tmp_path / "shapes-stripped"
    subprocess.run(["strip", "-o", str(stripped), shapes], check=True)
    proc = run_ok("-F", HZ, "-c", f"{stripped} 20")
    stacks = parse_folded(proc.stdout)
    unknown = under(stacks, "[unknown] (shapes-stripped)")
    assert unknown >= 0.8 * sum(stacks.values()), stacks
    assert "hot" not in {f for s in stacks for f in s}


def test_cxx_names_are_demangled_without_cxxfilt(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    exe = BUILD / "shapes-cxx"
    BUILD.mkdir(parents=True, exist_ok=True)
    subprocess.run(["g++", "-x", "c++", *CFLAGS, "-o", str(exe), str(HERE / "shapes.c")],
                   check=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=str(tmp_path))   # no c++filt
    proc = subprocess.run([sys.executable, "-m", "pyebpf", "profile", "-F", HZ, "-c",
                           f"{exe} 20"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    frames = {f for s in parse_folded(proc.stdout) for f in s}
    assert {"hot(unsigned long)", "work(unsigned long)", "spin(unsigned long, unsigned long)"} \
        <= frames, frames


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("args, status, message", [
    (["-o", "x.png", "-d", "1"], 2, "unknown output format '.png'"),
    (["-F", "0"], 2, "expected a positive integer"),
    (["-F", "1000000"], 2, "at most 100000 Hz"),
    (["-p", "1", "-c", "true"], 2, "not allowed with argument"),
    (["-c", "/nonexistent/program"], 1, "cannot run '/nonexistent/program'"),
    (["-d", "0"], 2, "positive"),
])
def test_bad_input_is_one_line(args, status, message):
    proc = cli("profile", *args)
    assert proc.returncode == status, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_a_process_that_is_not_there():
    p = subprocess.Popen(["true"])
    p.wait()
    proc = cli("profile", "-p", str(p.pid))
    assert proc.returncode == 1 and f"no process {p.pid}" in proc.stderr


def test_an_unwritable_output_still_gives_the_stacks(shapes):
    proc = cli("profile", "-F", HZ, "-c", f"{shapes} 10", "-o", "/nonexistent/dir/x.svg")
    assert proc.returncode == 1
    assert "/nonexistent/dir" in proc.stderr and "folded stacks follow on stdout" in proc.stderr
    assert under(parse_folded(proc.stdout), "work", "hot") > 0


@pytest.mark.parametrize("output", [["-o", "/nonexistent/dir/x.svg"], []],
                         ids=["unwritable-file", "stdout-only"])
def test_stacks_stdout_cannot_take_land_in_a_named_file(shapes, tmp_path, output):
    """-o to an unwritable path (or no -o) and stdout failing too (/dev/full):
    the stacks go to a new file in $TMPDIR, and stderr says where (before,
    they were lost with only 'No space left on device')."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "pyebpf", "profile", "-q", "-F", HZ, "-c",
                               f"{shapes} 10", *output], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, env=env, cwd=str(ROOT))
    assert proc.returncode == 1, proc.stderr
    saved = list(tmp_path.glob("pyebpf-profile-*.folded"))
    assert len(saved) == 1, proc.stderr
    assert saved[0].name.startswith(f"pyebpf-profile-") and saved[0].stat().st_mode & 0o077 == 0
    assert proc.stderr.endswith(f"pyebpf profile: standard output: No space left on device; "
                                f"the folded stacks were written to {saved[0]}\n"), proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    if output:
        assert "pyebpf profile: /nonexistent/dir/x.svg: No such file or directory" in proc.stderr
    assert under(parse_folded(saved[0].read_text()), "work", "hot") > 0


# ------------------------------------------------------------------ in process
def test_the_profiler_leaves_nothing_behind(no_fd_leak, shapes):
    from pyebpf import attach
    from pyebpf.profile.sampler import Profiler
    worker = subprocess.Popen([shapes, "100000"])
    try:
        with Profiler(499, pid=worker.pid) as prof:
            prof.attach()
            ids = prof.link.link_ids
            time.sleep(0.5)
            prof.detach()
            assert not set(ids) & set(attach.link_ids())
            stacks = prof.stacks()
    finally:
        worker.kill()
        worker.wait()
    assert under(stacks, "main") > 0
