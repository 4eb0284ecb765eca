"""The package facades' names imported on first use (pyebpf._lazy)."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FACADES = ["pyebpf", "pyebpf.kernel", "pyebpf.kernel.syscall", "pyebpf.btf", "pyebpf.elf",
           "pyebpf.usdt", "pyebpf.attach", "pyebpf.lang", "pyebpf.probes", "pyebpf.symbols",
           "pyebpf.draw", "pyebpf.session"]


@pytest.mark.parametrize("name", FACADES)
def test_every_lazy_name_resolves_and_stays(name):
    module = importlib.import_module(name)
    homes = getattr(module, "_LAZY", None) or module._HOME
    for attr, home in homes.items():
        value = getattr(module, attr)
        package = name if hasattr(module, "__path__") else name.rsplit(".", 1)[0]
        assert value is getattr(importlib.import_module(f"{package}.{home}"), attr)
        assert module.__dict__[attr] is value          # kept: the next read is a plain lookup


@pytest.mark.parametrize("name", FACADES)
def test_an_unknown_name_is_an_attribute_error(name):
    module = importlib.import_module(name)
    with pytest.raises(AttributeError, match=rf"module '{name}' has no attribute 'no_such'"):
        module.no_such                                  # noqa: B018
    assert not hasattr(module, "no_such")


def test_dir_lists_the_names_not_loaded_yet():
    code = ("import pyebpf.elf as e, sys; assert 'pyebpf.elf.writer' not in sys.modules; "
            "assert 'ElfWriter' in dir(e); assert 'pyebpf.elf.writer' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
