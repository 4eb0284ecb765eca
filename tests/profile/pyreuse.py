"""Two functions, one after the other, whose code objects share an address:
alpha() runs, is freed, and functions named beta are made until one's code
object lands where alpha's was; then beta() runs.  Prints "reused" (or
"not reused" and exits 3)."""
import gc
import sys
import time

SRC = "def {}():\n    n = 0\n    for i in range(20000):\n        n += i\n    return n\n"


def made(name):
    ns = {}
    exec(compile(SRC.format(name), "reuse.py", "exec"), ns)
    return ns[name]


def run(f, seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        f()


f = made("alpha")
addr = id(f.__code__)
run(f, float(sys.argv[1]))
del f
gc.collect()
for _ in range(10000):
    g = made("betaa")
    if id(g.__code__) == addr:
        break
else:
    print("not reused")
    sys.exit(3)
print("reused")
run(g, float(sys.argv[1]))
