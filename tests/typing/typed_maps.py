"""Maps typed by their codecs: no annotation, no cast, no isinstance on results.

Only type-checked (``mypy --strict``), never run: ``assert_type`` fails the
check when a map's key or value type is not the one its codec decodes to.
"""
from __future__ import annotations

import ctypes

from typing_extensions import assert_type

from pyebpf.maps import (ArrayMap, Bytes, Codec, HashMap, LruHashMap, MapSpec, PerCpuArrayMap,
                         PerCpuHashMap, QueueMap, RingBuf, StackMap, codec)


class Conn(ctypes.Structure):
    """A ctypes record: the values of a map decode to it (its fields are
    typed where the class says so: ctypes makes them from ``_fields_``)."""

    _fields_ = [("pid", ctypes.c_uint32), ("sent", ctypes.c_uint64)]
    pid: int
    sent: int


counts = HashMap("u32", "u64", 1024, name="counts")        # README's spelling, keywords too
assert_type(counts, HashMap[int, int])
assert_type(HashMap(key="u32", value="u64", max_entries=64, name="c2"), HashMap[int, int])
total: int = sum(n for _, n in counts.items())
for pid, n in counts.items():
    assert_type(pid, int)
    print(pid + 1, n * 2)
assert_type(counts.get(7), "int | None")
assert_type(counts.get(7, 0), int)
assert_type(counts.to_dict(), dict[int, int])

conns = HashMap(Bytes(16), Conn)                            # a record value: its fields typed
assert_type(conns, HashMap[bytes, Conn])
c = conns[bytes(16)]
assert_type(c.sent, int)
conns[b"0123456789abcdef"] = Conn(1, 2)

seconds = LruHashMap(4, ctypes.c_double)                    # ctypes scalars: their Python type
assert_type(seconds, LruHashMap[int, float])

by_cpu = PerCpuHashMap("u32", "u64")                        # one value per possible CPU
assert_type(by_cpu[0], list[int])
slots = ArrayMap(Conn, 8)
assert_type(slots[3], Conn)
hits = PerCpuArrayMap("u64", 1)
assert_type(hits[0], list[int])

assert_type(codec("s32"), Codec[int])                       # codec specs alike
assert_type(codec(Conn).zero(), Conn)

# a struct format is a string: its type is the user's to say (an annotation, checked no further)
pairs: HashMap[int, tuple[int, int]] = HashMap("u32", "<QI")

jobs = QueueMap("u32", 16)                                  # queues and stacks: their values
jobs.push(7)
assert_type(jobs.pop(), int)
assert_type(jobs.pop(None), "int | None")
assert_type(StackMap(Conn, 4).drain(), list[Conn])
assert_type(counts.pop(7, 0), int)

pinned = HashMap.from_pin("/sys/fs/bpf/counts")             # opened: the class asked for
assert_type(pinned, HashMap)
n_pinned: int = len(pinned)

ring = MapSpec(RingBuf, 1 << 16).create()                   # a described map, then created
assert_type(ring, RingBuf)
size: int = ring.size
