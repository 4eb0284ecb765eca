"""The layout of :mod:`pyebpf.usdt.spec`: one decoder module per architecture
family, each imported on first use, all behind the same entry points."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import pyebpf.usdt.spec as spec
from pyebpf.errors import UsdtSpecError
from pyebpf.usdt import SUPPORTED_ARCHES, expected_forms, parse_arg

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAMILIES = ("x86", "aarch64", "arm", "riscv", "s390", "ppc")

# one spec per architecture, with the family that decodes it
SAMPLES = {
    "x86_64": "-4@8(%rdi)", "x32": "4@%eax", "i386": "-4@8(%ebp)",
    "aarch64": "8@[x0, 16]", "aarch64_ilp32": "4@w1", "arm": "4@[r1, #8]",
    "riscv64": "8@16(a0)", "riscv32": "4@a1", "s390x": "8@160(%r15)", "s390": "4@%r2",
    "ppc64": "8@3", "ppc64le": "8@16(%r1)", "ppc": "i5",
}


def _modules_after(code: str) -> list[str]:
    """The family modules loaded in a fresh interpreter after ``code``."""
    prog = (f"import sys\n{code}\nimport json\n"
            "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules\n"
            "                        if m.startswith('pyebpf.usdt.spec.'))))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env,
                         cwd=str(ROOT), timeout=60, check=True).stdout
    result: list[str] = json.loads(out)
    return result


def test_importing_the_package_loads_no_decoder() -> None:
    assert _modules_after("import pyebpf.usdt, pyebpf.usdt.spec") == []


@pytest.mark.parametrize("text, arch, family", [("-4@8(%rdi)", "x86_64", "x86"),
                                                ("8@[x0, 16]", "aarch64", "aarch64"),
                                                ("4@r0", "armhf", "arm"),
                                                ("8@3", "powerpc64", "ppc")])
def test_a_parse_loads_only_its_family(text: str, arch: str, family: str) -> None:
    code = f"from pyebpf.usdt import parse_arg\nparse_arg({text!r}, {arch!r}).describe()"
    assert _modules_after(code) == [family]


def test_every_architecture_has_a_family_module() -> None:
    assert set(SAMPLES) == set(SUPPORTED_ARCHES)
    for arch, text in SAMPLES.items():
        a = parse_arg(text, arch)
        assert a.arch == arch
        assert parse_arg(a.format(), arch) == a
        assert a.describe()
        family = sys.modules[f"pyebpf.usdt.spec.{spec._FAMILY[arch]}"]
        assert expected_forms(arch) == family.EXPECTED
    assert sorted(set(spec._FAMILY.values())) == sorted(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_modules_import_directly_and_share_the_records(family: str) -> None:
    """A family module imported on its own works (no import cycle with the
    package) and builds the package's own ArgSpec."""
    arch = next(a for a in SAMPLES if spec._FAMILY[a] == family)
    code = (f"import pyebpf.usdt.spec.{family} as m\n"
            "from pyebpf.usdt.spec import ArgSpec, parse_arg\n"
            "assert callable(m.parse) and m.FORMS and m.EXPECTED\n"
            f"assert type(parse_arg({SAMPLES[arch]!r}, {arch!r})) is ArgSpec\n")
    assert _modules_after(code) == [family]


def test_an_error_names_the_family_forms() -> None:
    with pytest.raises(UsdtSpecError) as exc:
        parse_arg("8@%zz", "s390x")
    assert "expected N@%rN" in str(exc.value)
    assert exc.value.expected == expected_forms("s390")


def test_private_names_read_from_the_package() -> None:
    """Names tests and benchmarks import from pyebpf.usdt.spec still resolve."""
    from pyebpf.usdt.spec import _X86_R32, _X86_R64, _parse_cached
    assert _X86_R64["dil"] == ("rdi", 1, 0)
    assert _X86_R32["ah"] == ("eax", 1, 8)
    assert callable(_parse_cached.cache_clear)
    with pytest.raises(AttributeError):
        spec.no_such_name  # noqa: B018
