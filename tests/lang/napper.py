"""Workload of the kernel-struct tests: nanosleep(2) called directly (libc's
nanosleep() makes clock_nanosleep), for known durations."""
import ctypes

libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


for sec, nsec in [(0, 120_000_000), (0, 5_000), (1, 2_000_000)]:
    libc.syscall(35, ctypes.byref(Timespec(sec, nsec)), None)     # SYS_nanosleep (x86_64)
