"""pyebpf.attach as a package: every name of its API importable from the package,
the tracepoint and perf-event modules loaded only on first use, each module small."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import pyebpf.attach as attach

ROOT = pathlib.Path(attach.__file__).resolve().parent.parent.parent


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_uprobe_path_loads_neither_tracepoints_nor_perf_events():
    out = _run("import sys, pyebpf.attach\n"
               "print(' '.join(sorted(m for m in sys.modules if m.startswith('pyebpf.'))))")
    loaded = set(out.split())
    attach_modules = {m for m in loaded if m.startswith("pyebpf.attach.")}
    assert attach_modules == {"pyebpf.attach._programs", "pyebpf.attach.link",
                              "pyebpf.attach.uprobe"}
    assert "pyebpf.kernel.cpus" not in loaded          # only perf events need the CPU list


def test_a_lazy_name_loads_its_module_once():
    out = _run("import sys, pyebpf.attach as a\n"
               "f = a.tracepoint_format\n"
               "from pyebpf.attach import attach_perf_event, PERF_EVENTS\n"
               "from pyebpf.attach.tracepoint import tracepoint_format\n"
               "print(f is tracepoint_format, 'tracepoint_format' in vars(a),\n"
               "      'pyebpf.attach.perf_event' in sys.modules, 'cpu-clock' in PERF_EVENTS)")
    assert out.split() == ["True"] * 4


def test_every_public_name_is_importable_from_the_package():
    names = set(attach.__all__)
    assert {"Link", "attach_uprobe", "attach_tracepoint", "TracepointFormat",
            "parse_tracepoint_format", "attach_perf_event", "PERF_EVENTS", "attach_kprobe",
            "tracefs_dir", "link_ids"} <= names
    for name in names:
        assert getattr(attach, name) is not None, name
    assert names <= set(dir(attach))
    ns: dict[str, object] = {}
    exec("from pyebpf.attach import *", ns)
    assert names <= set(ns)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'attach_kprob'"):
        attach.attach_kprob  # noqa: B018
    with pytest.raises(ImportError):
        exec("from pyebpf.attach import attach_kprob", {})


def test_no_module_of_the_package_is_large():
    pkg = os.path.dirname(attach.__file__)
    sizes = {}
    for name in os.listdir(pkg):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name)) as f:
                sizes[name] = sum(1 for _ in f)
    assert len(sizes) >= 6
    assert max(sizes.values()) < 800, sizes
