"""Provider.fire checks its arguments against the declared types before
anything happens: a wrong count or type, or an integer its type cannot hold,
is a PyebpfError naming the probe and the argument -- never a ctypes error,
never a silently truncated value, never a loaded provider -- and an unknown
probe name lists the defined ones (issue 24, item 17)."""
from __future__ import annotations

import enum

import pytest

from pyebpf.errors import ArgumentTypeError, PyebpfError, UsdtError, UsdtProbeLookupError
from pyebpf.usdt import Provider

from usdt_tracelib import wait_events

INT_TYPES = {"s8": (-2**7, 2**7 - 1), "u8": (0, 2**8 - 1), "s16": (-2**15, 2**15 - 1),
             "u16": (0, 2**16 - 1), "s32": (-2**31, 2**31 - 1), "u32": (0, 2**32 - 1),
             "s64": (-2**63, 2**63 - 1), "u64": (0, 2**64 - 1), "ptr": (0, 2**64 - 1)}


class Color(enum.IntEnum):
    RED = 3


def test_a_bad_fire_is_refused_before_the_provider_loads():
    app = Provider("argcheck")
    req = app.probe("request", "s32", str, "u8")
    cases = [
        ((2**40 + 5, "GET", 1), UsdtError,
         r"probe argcheck:request: argument 0 \(s32\): 1099511627781 is out of range "
         r"\(-2147483648 to 2147483647\)"),
        ((1, "GET", 256), UsdtError, r"argument 2 \(u8\): 256 is out of range \(0 to 255\)"),
        ((1, "GET", -1), UsdtError, r"argument 2 \(u8\): -1 is out of range"),
        (("1", "GET", 1), ArgumentTypeError,
         r"probe argcheck:request: argument 0 \(s32\) takes an int, not str"),
        ((1.5, "GET", 1), ArgumentTypeError, r"argument 0 \(s32\) takes an int, not float"),
        ((1, 7, 1), ArgumentTypeError, r"argument 1 \(str\) takes str or bytes"),
        ((1, "\udcff", 1), UsdtError, r"argument 1 \(str\): .* cannot be encoded as UTF-8"),
        ((1, "GET"), ArgumentTypeError,
         r"probe argcheck:request takes 3 argument\(s\) \(s32, str, u8\), 2 given"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message) as info:
            req.fire(*args)
        assert isinstance(info.value, PyebpfError)
        assert not app.loaded and app.path is None      # nothing happened
    app.close()


@pytest.mark.parametrize("name", sorted(INT_TYPES))
def test_every_integer_type_takes_its_range_and_nothing_else(name):
    lo, hi = INT_TYPES[name]
    with Provider("ranges") as app:
        p = app.probe("p", name)
        for loaded in (False, True):             # the first fire loads; later ones are bound
            for bad in (lo - 1, hi + 1, hi + 2**64, lo - 2**64):
                with pytest.raises(UsdtError, match=f"argument 0 \\({name}\\): {bad} is out"):
                    p.fire(bad)
            assert app.loaded is loaded
            p.fire(lo)
            p.fire(hi)
            p.fire(True)                         # a bool and an IntEnum are ints
            p.fire(Color.RED)
            assert app.loaded


def test_a_loaded_probe_checks_too():
    with Provider("bound") as app:
        p = app.probe("p", "s32", "u16")
        s = app.probe("s", "char *", int)
        app.load()
        with pytest.raises(UsdtError, match=r"argument 0 \(s32\): 1099511627781 is out"):
            p.fire(2**40 + 5, 1)
        with pytest.raises(ArgumentTypeError, match=r"argument 1 \(u16\) takes an int, not "
                                                    "NoneType"):
            p.fire(1, None)
        with pytest.raises(ArgumentTypeError, match="takes 2 argument"):
            p.fire(1, 2, 3)
        with pytest.raises(ArgumentTypeError, match=r"argument 0 \(str\) takes str or bytes"):
            s.fire(b"x".decode, 1)
        with pytest.raises(UsdtError, match=r"argument 1 \(s64\): 9223372036854775808 is out"):
            s.fire("x", 2**63)
        s.fire(None, 1)                          # a NULL char *
        s.fire(b"bytes", -1)


def test_an_unknown_probe_name_lists_the_defined_ones():
    app = Provider("named")
    app.probe("request", int)
    app.probe("reply", int)
    for ask in (lambda: app.usdt("nope"), lambda: app["nope"]):
        with pytest.raises(UsdtProbeLookupError,
                           match=r"provider 'named' has no probe 'nope' \(defined: request, "
                                 r"reply\)") as info:
            ask()
        assert isinstance(info.value, PyebpfError) and isinstance(info.value, LookupError)
        assert info.value.candidates == ["named:request", "named:reply"]
    assert not app.loaded
    with pytest.raises(UsdtProbeLookupError, match=r"defined: none yet"):
        Provider("empty")["x"]
    app.close()


@pytest.mark.kernel
def test_a_refused_value_never_reaches_the_tracer(no_fd_leak):
    """An s32 of 2**40 + 5 was traced as 5; now it is refused and the tracer
    sees only the values that fit."""
    with Provider("notrunc") as app:
        p = app.probe("p", "s32")
        app.load()
        with p.usdt().trace() as t:
            with pytest.raises(UsdtError, match="out of range"):
                p.fire(2**40 + 5)
            p.fire(-7)
            assert wait_events(t, 1) == [(-7,)]
