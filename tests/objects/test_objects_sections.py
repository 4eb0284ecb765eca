"""Section names of libbpf 0.x (``xdp/NAME``, ``classifier/NAME``,
``perf_event/...``): taken by default, as libbpf 0.x took them, and said so;
refused with ``strict_sections`` / ``--strict-sections``, as libbpf 1.x
refuses them (issue 28, item 5).  libbpf's verdict (bpftool prog loadall,
libbpf 1.x) stands beside."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pyebpf.objects import ObjectError, open_object
from pyebpf.objects.sections import section_def, section_match

from .conftest import HERE, compile_bpf, libbpf_loads

OLD = {"xdp_named": "xdp/filter", "tc_named": "classifier/ingress",
       "on_cpu_clock": "perf_event/type=1,config=0,frequency=1,sample_period=49"}


@pytest.mark.parametrize("name, lenient", [
    ("xdp", False), ("xdp/filter", True), ("xdp.frags", False), ("classifier", False),
    ("classifier/ingress", True), ("tc/ingress", True), ("perf_event/type=1", True),
    ("socket/udp", True), ("uprobe/bin:func", False), ("usdt/bin:p:n", False),
    ("uprobe.s//bin:f", False), ("kprobe/do_sys_open", False), ("tracepoint/a/b", False),
    ("sk_skb/stream_parser", False), ("sk_skb/other", True), ("cgroup/skb", False)])
def test_strict_matching_is_libbpf_1x(name, lenient):
    sdef, was_lenient = section_match(name)
    assert sdef is not None and was_lenient == lenient
    assert section_def(name) is sdef
    assert (section_def(name, strict=True) is None) == lenient


@pytest.fixture(scope="module")
def exact_only(objects, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("oldsections")
    os.symlink(os.path.join(os.path.dirname(objects["multi"]), "vmlinux.h"), out / "vmlinux.h")
    return compile_bpf(HERE / "c" / "oldsections.bpf.c", out, "exact.o", "-DEXACT_ONLY")


@pytest.mark.kernel
def test_lenient_by_default_strict_as_libbpf_1x(objects, exact_only):
    path = objects["oldsections"]
    ok, err = libbpf_loads(path)
    assert not ok, err                       # libbpf 1.x refuses the 0.x names
    with open_object(path) as obj:
        assert {n for n, p in obj.programs.items() if p.lenient_section} == set(OLD)
        obj.load()
        assert all(p.status == "loaded" for p in obj.programs.values())
    with open_object(path, strict_sections=True) as obj:
        obj.load(strict=False)
        assert obj.programs["xdp_exact"].status == "loaded"
        for name, section in OLD.items():
            p = obj.programs[name]
            assert p.status == "rejected", name
            assert p.reason.startswith(f"program {name!r}: section {section!r} is libbpf "
                                       "0.x's form of "), p.reason
            assert "which libbpf 1.x refuses" in p.reason
    with pytest.raises(ObjectError, match="which libbpf 1.x refuses"):
        open_object(path, strict_sections=True).load()
    ok, err = libbpf_loads(exact_only)
    assert ok, err
    with open_object(exact_only, strict_sections=True) as obj:
        obj.load()


@pytest.mark.kernel
def test_the_command_line_says_so(objects):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parents[1]) + os.pathsep + env.get("PYTHONPATH", "")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pyebpf", "object",
                               objects["oldsections"], *args],
                              capture_output=True, text=True, env=env, timeout=120)

    shown = run().stdout.splitlines()
    marked = [ln for ln in shown if "[libbpf 0.x section name: libbpf 1.x refuses it]" in ln]
    assert len(marked) == 3 and all(sum(f" {n} " in ln for ln in marked) == 1 for n in OLD)
    res = run("--load")
    assert res.returncode == 0, res.stderr
    assert "program xdp_named (xdp): loaded (libbpf 0.x section name: libbpf 1.x refuses it)" \
        in res.stdout.splitlines()
    res = run("--load", "--strict-sections")
    assert res.returncode == 1
    assert "1 loaded, 3 rejected, 0 skipped" in res.stdout
