"""A pure-Python workload of known shape for the profiler's tests.

``python pyshapes.py SECONDS``: each round spins 3 units in hot(), 1 in
cold(), 1 at the bottom of a 5-deep recursion, 1 in a generator and 1 in a
key function that the C function ``sorted`` calls, in an order drawn anew
each round.  A unit is a count of
loop iterations, not a time: the CPU time shares hold on a busy machine
too (where a spin measured by the clock loses the time it is preempted).
The lines marked ``# at:NAME`` are where each function spends its time.
"""
import random
import sys
import time


UNIT = 20000


def spin(units):
    for _ in range(int(units * UNIT)):  # at:spin
        pass


def hot():
    spin(3)                            # at:hot


def cold():
    spin(1)                            # at:cold


def recurse(n):
    if n:
        return recurse(n - 1)          # at:recurse
    spin(1)


def numbers():
    for _ in range(2):
        spin(0.5)                      # at:numbers
        yield 1


def by_key(x):
    spin(0.5)                          # at:by_key
    return x


def main(seconds):                     # at:main_start
    end = time.perf_counter() + seconds
    order = random.Random(7)      # (a fixed order would beat with the sampling period)
    while time.perf_counter() < end:
        for step in order.sample(range(5), 5):
            if step == 0:
                hot()
            elif step == 1:
                cold()
            elif step == 2:
                recurse(4)
            elif step == 3:
                sum(numbers())
            else:
                sorted([2, 1], key=by_key)    # at:main_end


main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
