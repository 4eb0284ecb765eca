"""``pyebpf bt``'s start: the primer of the kernel's first-uprobe wait
(:func:`pyebpf.kernel.bare.prime_uprobes`) that the cached and the compiled
start both run before their programs are loaded."""
from __future__ import annotations

import os
import sys

import pytest

from pyebpf.kernel import bare


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.kernel
def test_the_primer_closes_what_it_opened() -> None:
    interval = sys.getswitchinterval()
    before = _fds()
    done = bare.prime_uprobes()
    assert done is not None, "this kernel has uprobe_multi links: the primer starts"
    assert done.acquire(timeout=30), "the primer's thread ended"
    assert _fds() == before, "its program, file and link are closed"
    assert sys.getswitchinterval() == interval, "the switch interval is put back"


@pytest.mark.kernel
def test_primers_running_together_each_end() -> None:
    interval = sys.getswitchinterval()
    before = _fds()
    locks = [bare.prime_uprobes() for _ in range(3)]
    assert all(lock is not None for lock in locks)
    assert all(lock.acquire(timeout=30) for lock in locks)
    assert _fds() == before
    assert sys.getswitchinterval() == interval


@pytest.mark.kernel
def test_maps_made_in_a_thread_are_the_callers() -> None:
    before = _fds()
    maker = bare.MapMaker([("bt0_a", 1, 8, 8, 16, 0), ("bt_events", 27, 0, 0, 1 << 16, 0)])
    fds = maker.take()
    assert len(fds) == 2 and all(fd > 0 for fd in fds)
    assert bare.elem(bare.UPDATE, fds[0], bytes(8), bytes(8))      # (a hash map of 8-byte keys)
    for fd in fds:
        os.close(fd)
    assert _fds() == before


@pytest.mark.kernel
def test_a_refused_map_is_its_errno_and_the_last() -> None:
    before = _fds()
    maker = bare.MapMaker([("bt0_a", 1, 8, 8, 16, 0), ("bad", 1, 0, 8, 16, 0),
                           ("bt1_b", 1, 8, 8, 16, 0)])
    fds = maker.take()
    assert len(fds) == 2 and fds[0] > 0 and fds[1] == -22     # (EINVAL: a key of 0 bytes)
    os.close(fds[0])
    assert _fds() == before


@pytest.mark.kernel
def test_maps_never_taken_are_closed_with_their_maker() -> None:
    before = _fds()
    maker = bare.MapMaker([("bt0_a", 1, 8, 8, 16, 0)])
    with maker._done:                  # (the thread has ended)
        pass
    assert len(_fds()) == len(before) + 1
    del maker
    assert _fds() == before


def test_a_map_without_a_key_is_made_for_one_entry() -> None:
    from pyebpf import lang
    unit = lang.compile('BEGIN { @c = count(); @s = sum(1); @a = avg(2); @v = 5; '
                        '@k[1] = count(); @h = hist(3); }').generate()
    entries = {plan.name: plan.spec.max_entries for plan in unit.maps.values()
               if plan.kind != "hist"}         # (hist without a key: an array of buckets)
    assert entries == {"@c": 1, "@s": 1, "@a": 1, "@v": 1, "@k": 4096}, entries
