"""Two threads for the profiler's tests: ``python pythreads.py SECONDS``.

The main thread spins in Python (it holds the GIL); the other hashes a
megabyte at a time in C with the GIL released, so both are on a CPU at
once and a sample of the hashing thread must show its own Python frames.
"""
import hashlib
import sys
import threading
import time

DATA = b"x" * (1 << 20)


def hashing(end):
    while time.perf_counter() < end:
        hashlib.sha256(DATA).digest()


def spinning(end):
    while time.perf_counter() < end:
        pass


end = time.perf_counter() + float(sys.argv[1])
thread = threading.Thread(target=hashing, args=(end,))
thread.start()
spinning(end)
thread.join()
