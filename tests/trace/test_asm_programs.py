"""Every program of asm/ loads, attaches and produces the expected data
(through `pyebpf run`, on the deterministic workload)."""
from __future__ import annotations

import json
import re

import pytest

from pyebpf.session.asmfile import read_asm_file

from .conftest import ROOT, cli, expected

# (each test that needs the kernel is marked `kernel`; the others run under every Python)
ASM = ROOT / "asm"
N = 200


def run(name: str, *args: str) -> tuple[str, str]:
    proc = cli("run", str(ASM / name), *args, check=True)
    return proc.stdout, proc.stderr


def test_every_file_is_documented():
    files = sorted(ASM.glob("*.s"))
    readme = (ASM / "README.md").read_text()
    assert {f.name for f in files} >= {"count_calls.s", "latency_hist.s", "usdt_args.s",
                                       "execsnoop.s", "opensnoop.s"}
    for f in files:
        af = read_asm_file(str(f))
        assert af.description, f
        assert f"`{f.name}`" in readme, f
        assert f.read_text().startswith(f"# {f.name} -- "), f


@pytest.mark.kernel
def test_count_calls(workload):
    out, err = run("count_calls.s", "-D", f"BINARY={workload}", "-D", "FUNC=work",
                   "-c", f"{workload} {N}")
    (line,) = [x for x in out.splitlines() if x.startswith("@")]
    assert re.fullmatch(rf"@calls\[\d+\]: {N}", line), out
    assert "Attached 1 program" in err


@pytest.mark.kernel
def test_latency_hist(workload):
    out, _ = run("latency_hist.s", "-D", f"BINARY={workload}", "-D", "FUNC=slow",
                 "-c", f"{workload} {N} 300")
    rows = [x for x in out.splitlines() if x.startswith("[")]
    counts = [int(re.search(r"[)\]]\s+(\d+) \|", x).group(1)) for x in rows]
    assert sum(counts) == expected(N)["slow_calls"], out
    lo = int(re.match(r"\[(\d+)", rows[0]).group(1))
    assert lo >= 256, out               # nanosleep(300 us) takes at least 300 us
    assert "@usecs: \n" in out


@pytest.mark.kernel
def test_latency_hist_json(workload):
    out, _ = run("latency_hist.s", "-D", f"BINARY={workload}", "-D", "FUNC=slow",
                 "-c", f"{workload} 40 100", "--json", "-q")
    objs = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    (h,) = [o for o in objs if o["type"] == "hist"]
    assert sum(b["count"] for b in h["data"]["@usecs"]) == 5


@pytest.mark.kernel
def test_usdt_args(workload):
    out, _ = run("usdt_args.s", "-D", f"BINARY={workload}", "-c", f"{workload} 30")
    lines = [x for x in out.splitlines() if not x.startswith("total")]
    # usdt_args.s outputs to a perf_event_array: one ring per CPU, drained
    # one after the other, so when the workload moved to another CPU (its
    # nanosleep every 8 calls is a chance to) its events come CPU by CPU
    lines.sort(key=lambda x: int(x.split()[0]))
    assert lines == [f"{i} {i % 10} {['alice', 'bob', 'carol'][i % 3]}" for i in range(30)]


@pytest.mark.kernel
def test_opensnoop(workload):
    out, _ = run("opensnoop.s", "-c", f"{workload} {N}", "--json")
    evs = [json.loads(x)["fields"] for x in out.splitlines() if x.startswith("{")]
    null = [e for e in evs if e["filename"] == "/dev/null"]
    assert len(null) == expected(N)["opens"]
    assert {e["comm"] for e in evs} == {"workload"} and len({e["pid"] for e in evs}) == 1
    assert all(e["flags"] & 3 == 0 for e in null)             # O_RDONLY
    text, _ = run("opensnoop.s", "-c", f"{workload} 20", "-q")
    assert re.search(r"^\d+ +0 +workload +/dev/null$", text, re.M), text


@pytest.mark.kernel
def test_execsnoop():
    out, _ = run("execsnoop.s", "-c", "/bin/echo hello-from-execsnoop", "--json")
    evs = [json.loads(x)["fields"] for x in out.splitlines() if x.startswith("{")]
    assert [(e["filename"], e["arg1"]) for e in evs] == [("/bin/echo", "hello-from-execsnoop")]
    assert evs[0]["uid"] == 0


@pytest.mark.kernel
def test_parameters_and_errors(workload, tmp_path):
    proc = cli("run", str(ASM / "count_calls.s"), "-c", "true")
    assert proc.returncode == 1 and "BINARY" in proc.stderr and "-D BINARY=VALUE" in proc.stderr
    proc = cli("run", str(ASM / "count_calls.s"), "-D", "BINARY=/x", "-D", "FUNC=f", "-D", "X=1")
    assert proc.returncode == 1 and "unknown parameter(s) X" in proc.stderr
    proc = cli("run", str(ASM / "count_calls.s"), "-D", "oops")
    assert proc.returncode == 2 and "NAME=VALUE" in proc.stderr
    proc = cli("run", str(ASM / "count_calls.s"), "--info")
    assert proc.returncode == 0 and "FUNC" in proc.stdout and "calls" in proc.stdout
    bad = tmp_path / "bad.s"
    bad.write_text("# pyebpf: program p attach=tracepoint:syscalls:sys_enter_openat\n"
                   "    r0 = *(u64 *)(r10 + 8)\n    exit\n")
    proc = cli("run", str(bad), "-d", "0.1")
    assert proc.returncode == 1 and f"{bad}:2" in proc.stderr, proc.stderr
    proc = cli("run", str(tmp_path / "missing.s"))
    assert proc.returncode == 1 and "missing.s" in proc.stderr
