"""The numbers of attach points (``profile:hz:N``, ``interval:UNIT:N``,
``software:EVENT:N``, ``hardware:EVENT:N``) are read by one rule, bpftrace
0.17's: underscores dropped, ``0x`` hex, ``010`` octal, ``1e3``, a C suffix
(``5ul``), a sign; and refused with bpftrace's messages.

One table says what each attach point means; it is checked through pyebpf
(``lang.compile`` and the resolved probe) and, when bpftrace is installed,
through the real bpftrace (accepted or refused, its message, and for
``profile``/``interval`` the number its ``probe`` builtin prints)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf import lang
from pyebpf.lang.errors import LangError
from pyebpf.lang.probes import SOFTWARE_EVENTS, ProbeSpecError, resolve
from pyebpf.lang.sema_base import attach_point_number

#: attach point -> its number as bpftrace reads it (an int: accepted), or the
#: message bpftrace 0.17 refuses it with (a str), as observed on this machine
TABLE: list[tuple[str, int | str]] = [
    ("profile:hz:99", 99),
    ("profile:hz:010", 8),                 # octal
    ("profile:hz:0x1e", 30),               # hex: an "e" in it is a digit
    ("profile:hz:0X1F", 31),
    ("profile:hz:0x_1e", 30),
    ("profile:hz:0x1fu", 31),
    ("profile:hz:1e2", 100),
    ("profile:hz:1E2", 100),
    ("profile:hz:1e+1", 10),
    ("profile:hz:9e0", 9),
    ("profile:hz:1e_2", 100),              # underscores go anywhere
    ("profile:hz:1_00", 100),
    ("profile:hz:_5", 5),
    ("profile:hz:5_", 5),
    ("profile:hz:+5", 5),
    ("profile:hz:99u", 99),
    ("profile:hz:99ul", 99),
    ("profile:hz:99ULL", 99),
    ("profile:hz:99lL", 99),
    ("interval:ms:010", 8),
    ("interval:ms:1e2", 100),
    ("interval:us:0x3e8", 1000),
    ("interval:hz:1e1", 10),
    ("i:ms:1_0", 10),
    ("software:faults:1e2", 100),
    ("software:faults:010", 8),
    ("software:cpu:00", 0),                # 0: the event's default count
    ("software:faults:0", 0),
    ("profile:hz:1e", "Exponent part of scientific literal is not a valid number: : stoull"),
    ("profile:hz:e3", "Coefficient part of scientific literal is not a valid number: : stoull"),
    ("profile:hz:ae2", "Coefficient part of scientific literal is not a valid number: a: stoull"),
    ("profile:hz:1e2e3", "Exponent part of scientific literal is not a valid number: 2e3: "
                         "Found trailing non-numeric characters"),
    ("profile:hz:10e2", "Coefficient part of scientific literal must be in range (0,9), got: 10"),
    ("profile:hz:-1e2", "Coefficient part of scientific literal must be in range (0,9), got: -1"),
    ("profile:hz:1e17", "Exponent will overflow integer range: 17"),
    ("profile:hz:1e-1", "Exponent will overflow integer range: -1"),
    ("profile:hz:99x", "Found trailing non-numeric characters"),
    ("profile:hz:99lu", "Found trailing non-numeric characters"),
    ("profile:hz:99uu", "Found trailing non-numeric characters"),
    ("profile:hz:08", "Found trailing non-numeric characters"),
    ("profile:hz:0x", "Found trailing non-numeric characters"),
    ("profile:hz:1.5", "Found trailing non-numeric characters"),
    ("profile:hz:x", "stoull"),
    ("profile:hz:", "stoull"),
    ("profile:hz:18446744073709551616", "stoull"),
    ("profile:hz:0", "profile frequency should be a positive integer"),
    ("profile:hz:0e3", "profile frequency should be a positive integer"),
    ("profile:hz:-1", "profile frequency should be a positive integer"),
    ("profile:hz:-0x1", "profile frequency should be a positive integer"),
    ("profile:hz:18446744073709551615", "profile frequency should be a positive integer"),
    ("interval:ms:5x", "Found trailing non-numeric characters"),
    ("i:ms:5x", "Found trailing non-numeric characters"),
    ("interval:s:", "stoull"),
    ("interval:x:1e", "Exponent part of scientific literal is not a valid number: : stoull"),
    ("software:faults:5x", "Found trailing non-numeric characters"),
    ("software:faults:x", "stoull"),
    ("software:cpu-clock:", "stoull"),
    ("software:faults:1e17", "Exponent will overflow integer range: 17"),
    ("software:faults:-1", "software count should be a positive integer"),
    ("hardware:cycles:x", "stoull"),
    ("hardware:cycles:-1", "hardware frequency should be a positive integer"),
]
_IDS = [raw for raw, _ in TABLE]
_SHORT = {"i": "interval"}


def _program(raw: str) -> str:
    return raw + " { }"


def _first_line(raw: str, message: str) -> str:
    """bpftrace's first line for an error about attach point ``raw`` (the
    first thing in the script): its span is the attach point's text."""
    return f"stdin:1:1-{len(raw) + 1}: ERROR: {message}"


# ------------------------------------------------------------------ pyebpf
@pytest.mark.parametrize("raw, expected", TABLE, ids=_IDS)
def test_pyebpf_reads_the_number_as_bpftrace(raw: str, expected: int | str) -> None:
    if isinstance(expected, str):
        with pytest.raises((LangError, ProbeSpecError)) as info:
            lang.compile(_program(raw))
        assert isinstance(info.value, LangError), info.value     # bpftrace's own text
        assert str(info.value).split("\n")[0] == _first_line(raw, expected)
        return
    point = lang.compile(_program(raw)).script.probes[0].attach_points[0]
    (probe,) = resolve(point)
    provider, first = point.provider, point.parts[0]
    if provider in ("profile", "interval"):
        assert probe.name == f"{provider}:{first}:{expected}"
        if first == "hz":
            assert probe.source.frequency == expected
        else:
            assert probe.source.period == expected * {"s": 10**9, "ms": 10**6, "us": 1000}[first]
    else:
        default = next(d for name, (aliases, _c, d) in SOFTWARE_EVENTS.items()
                       if first in (name, *aliases))
        assert probe.source.period == (expected or default)


def test_a_number_error_is_the_only_error_of_its_attach_point() -> None:
    # bpftrace's attach point parser stops at the number: no unit complaint
    with pytest.raises(LangError) as info:
        lang.compile("interval:x:5x { }")
    assert str(info.value).split("\n")[0::3] == [
        "stdin:1:1-14: ERROR: Found trailing non-numeric characters"]
    with pytest.raises(LangError) as info:      # a good number: the unit is checked
        lang.compile("profile:x:0 { }")
    assert [d.message for d in info.value.diagnostics] == [
        "x is not an accepted unit of time", "profile frequency should be a positive integer"]


def test_every_attach_point_with_a_bad_number_is_reported() -> None:
    with pytest.raises(LangError) as info:
        lang.compile("profile:hz:x, interval:ms:5x { }")
    assert str(info.value).split("\n")[0::3] == [
        "stdin:1:1-13: ERROR: stoull",
        "stdin:1:14-29: ERROR: Found trailing non-numeric characters"]


def test_an_interval_too_long_for_64_bits_is_refused_not_a_crash() -> None:
    with pytest.raises(ProbeSpecError, match="does not fit in 64 bits"):
        lang.compile("interval:s:99999999999 { }")
    assert resolve(lang.compile("interval:s:9e9 { }").script.probes[0].attach_points[0]
                   )[0].source.period == 9 * 10**18


def test_an_interval_of_zero_is_refused() -> None:
    # (bpftrace refuses it when attaching: "Exactly one of sample_period /
    # sample_freq should be set")
    with pytest.raises(ProbeSpecError, match="interval:ms:0: the interval must be positive"):
        lang.compile("interval:ms:0 { }")


@fuzz_settings(300)
@given(value=st.integers(0, 2**64 - 1), form=st.sampled_from(["%d", "%#x", "%#X", "0%o"]),
       suffix=st.sampled_from(["", "u", "L", "ll", "Ul", "uLL"]), underscores=st.data())
def test_any_u64_written_any_way_reads_back(value: int, form: str, suffix: str,
                                           underscores: st.DataObject) -> None:
    text = (form % value) + suffix
    at = underscores.draw(st.lists(st.integers(0, len(text)), max_size=3))
    for i in sorted(at, reverse=True):
        text = text[:i] + "_" + text[i:]
    signed = value - 2**64 if value >= 2**63 else value
    assert attach_point_number(text) == signed


@fuzz_settings(300)
@given(text=st.text(alphabet="0123456789xXeE_+-uUlL. ab", max_size=12))
def test_any_text_is_a_number_or_a_clear_error(text: str) -> None:
    try:
        value = attach_point_number(text)
    except LangError as err:
        assert err.message
    else:
        assert -2**63 <= value < 2**63


# ---------------------------------------------------------------- bpftrace
def _bpftrace(program: str) -> subprocess.CompletedProcess:
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed")
    return subprocess.run(["bpftrace", "-e", program], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.kernel
@pytest.mark.parametrize("raw, expected", TABLE, ids=_IDS)
def test_bpftrace_reads_the_table_the_same(raw: str, expected: int | str) -> None:
    provider = raw.split(":")[0]
    provider = _SHORT.get(provider, provider)
    if isinstance(expected, str):
        proc = _bpftrace(_program(raw))
        assert proc.returncode != 0
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("stdin:")]
        assert errors[:1] == [_first_line(raw, expected)], proc.stderr
        return
    if provider in ("profile", "interval"):
        # the probe builtin prints the number as bpftrace read it
        proc = _bpftrace(f'{raw} {{ printf("%s\\n", probe); exit(); }}')
        assert proc.returncode == 0, proc.stderr
        unit = raw.split(":")[1]
        assert re.findall(r"^\S+:\S+:\d+$", proc.stdout, re.M) == [
            f"{provider}:{unit}:{expected}"]
    else:          # (bpftrace 0.17 cannot print probe in a software probe)
        proc = _bpftrace(f"BEGIN {{ exit(); }} {raw} {{ }}")
        assert proc.returncode == 0, proc.stderr
