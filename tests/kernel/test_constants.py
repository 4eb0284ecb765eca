"""The kernel's number tables behave like the IntEnums they replace."""
from __future__ import annotations

import copy
import pickle

import pytest

from pyebpf.kernel.constants import AttachType, MapType, ProgType, enum_name


def test_members_are_ints_with_names():
    k = ProgType.KPROBE
    assert k == 2 and isinstance(k, int) and isinstance(k, ProgType)
    assert (k.name, k.value) == ("KPROBE", 2)
    assert repr(k) == "<ProgType.KPROBE: 2>" and str(k) == "2" and f"{k:#x}" == "0x2"
    assert type(k + 1) is int and {k: 1}[2] == 1


def test_lookup_by_value_and_by_name():
    assert ProgType(2) is ProgType.KPROBE and ProgType["XDP"] is ProgType.XDP
    with pytest.raises(ValueError, match="999 is not a valid ProgType"):
        ProgType(999)
    with pytest.raises(KeyError):
        ProgType["NOPE"]
    assert enum_name(MapType, MapType.HASH) == "HASH" and enum_name(MapType, 9999) == "#9999"


def test_iteration_in_definition_order_and_members():
    values = [int(m) for m in MapType]
    assert values == sorted(values) and len(MapType) == len(values)
    assert MapType.__members__["RINGBUF"] is MapType.RINGBUF
    assert list(AttachType)[0] is AttachType(0)


def test_immutable_and_copies_are_the_members():
    with pytest.raises(AttributeError):
        ProgType.KPROBE = 5
    assert pickle.loads(pickle.dumps(ProgType.XDP)) is ProgType.XDP
    assert copy.deepcopy(ProgType.XDP) is ProgType.XDP
