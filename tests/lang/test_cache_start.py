"""``pyebpf bt``'s start: the primer of the kernel's first-uprobe wait
(:func:`pyebpf.kernel.bare.prime_uprobes`) that the cached and the compiled
start both run before their programs are loaded."""
from __future__ import annotations

import os

import pytest

from pyebpf.kernel import bare


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.kernel
def test_the_primer_closes_what_it_opened() -> None:
    before = _fds()
    done = bare.prime_uprobes()
    assert done is not None, "this kernel has uprobe_multi links: the primer starts"
    assert done.acquire(timeout=30), "the primer's thread ended"
    assert _fds() == before, "its program, file and link are closed"


@pytest.mark.kernel
def test_primers_running_together_each_end() -> None:
    before = _fds()
    locks = [bare.prime_uprobes() for _ in range(3)]
    assert all(lock is not None for lock in locks)
    assert all(lock.acquire(timeout=30) for lock in locks)
    assert _fds() == before


def test_a_map_without_a_key_is_made_for_one_entry() -> None:
    from pyebpf import lang
    unit = lang.compile('BEGIN { @c = count(); @s = sum(1); @a = avg(2); @v = 5; '
                        '@k[1] = count(); @h = hist(3); }').generate()
    entries = {plan.name: plan.spec.max_entries for plan in unit.maps.values()
               if plan.kind != "hist"}         # (hist without a key: an array of buckets)
    assert entries == {"@c": 1, "@s": 1, "@a": 1, "@v": 1, "@k": 4096}, entries
