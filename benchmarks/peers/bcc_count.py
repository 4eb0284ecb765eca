"""BCC: count the calls of a function in a program it starts (cold start).

usage: /usr/bin/python3 bcc_count.py BINARY SYMBOL -- CMD...   (prints ``@count: N``)
"""
import os
import sys

from bcc import BPF

TEXT = """
BPF_PERCPU_ARRAY(calls, u64, 1);
int probe(struct pt_regs *ctx) {
    int zero = 0;
    u64 *v = calls.lookup(&zero);
    if (v)
        (*v)++;
    return 0;
}
"""


def main() -> int:
    binary, symbol, sep, *cmd = sys.argv[1:]
    assert sep == "--" and cmd, __doc__
    b = BPF(text=TEXT)
    b.attach_uprobe(name=binary, sym=symbol, fn_name="probe")
    pid = os.posix_spawn(cmd[0], cmd, os.environ)
    _, status = os.waitpid(pid, 0)
    print(f"@count: {sum(b['calls'][0])}", flush=True)
    b.cleanup()
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
