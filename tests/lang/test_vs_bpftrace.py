"""The same bpftrace programs through ``pyebpf bt`` and through bpftrace
0.17, on the same deterministic workload: the outputs must be equal."""
from __future__ import annotations

import os
import re
import shutil

import pytest

from .harness import bt_workload, compare_with_bpftrace, run_bpftrace, run_pyebpf_bt

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def w() -> str:
    return bt_workload()


def test_begin_end_printf_and_maps() -> None:
    compare_with_bpftrace(
        'BEGIN { printf("hello %d %s %5d|%-5s|%x\\n", -3, "ab", 42, "x", 255); '
        '@x[1] = count(); @y = hist(5); @s = stats(3); @a = avg(-4); @z = 7; '
        'print(@x); exit(); } END { printf("end\\n"); }')


def test_entry_probe_counts_and_aggregations(w: str) -> None:
    compare_with_bpftrace(
        f"uprobe:{w}:compute /arg0 < 5/ {{ @c[arg0] = count(); @h = hist(arg1); "
        f"@st = stats(arg1); @a = avg(arg1); @mx = max(arg1); @mn = min(arg1); "
        f"@sm[arg0 % 2] = sum(arg1); }} "
        f"uretprobe:{w}:compute {{ @r = lhist(retval, 0, 5000, 500); }}", command=f"{w} 50 1")


def test_predicates_variables_ternary(w: str) -> None:
    compare_with_bpftrace(
        f"uprobe:{w}:compute {{ $k = arg0 * 2; $big = arg1 > 2500 ? 1 : 0; "
        f"if ($k >= 10) {{ @high[$big] = count(); }} else {{ @low[$k] = count(); }} }}",
        command=f"{w} 40 1")


def test_printf_per_event_in_order(w: str) -> None:
    compare_with_bpftrace(f'uprobe:{w}:compute /arg0 == 3/ {{ '
                          f'printf("%d %d %s\\n", arg0, arg1, comm); }}', command=f"{w} 40 1")


def test_entry_return_latency(w: str) -> None:
    # Each run is checked against its own measurements, not against the other
    # run's buckets: the naps asked for (10, 40, 160 ms: deterministic) are
    # the same in both, and each measured latency is at least its nap (a
    # loaded machine only adds to it).  lhist buckets the nap, not the time.
    prog = (f"uprobe:{w}:nap {{ @start[tid] = nsecs; @us[tid] = arg0; }} "
            f"uretprobe:{w}:nap /@start[tid]/ {{ "
            f'printf("%d %d\\n", @us[tid], (nsecs - @start[tid]) / 1000); '
            f"@naps = lhist(@us[tid] / 10000, 0, 20, 2); "
            f"delete(@start[tid]); delete(@us[tid]); }}")
    theirs = run_bpftrace(prog, command=f"{w} 24 10000")
    ours = run_pyebpf_bt(prog, command=f"{w} 24 10000")
    for tool, out in (("bpftrace", theirs), ("pyebpf bt", ours)):
        pairs = [tuple(map(int, ln.split())) for ln in out.splitlines()
                 if re.fullmatch(r"\d+ \d+", ln)]
        assert [asked for asked, _ in pairs] == [10000, 40000, 160000], (tool, out)
        for asked, took in pairs:
            assert asked <= took < asked + 30_000_000, (tool, asked, took)

    def maps(text: str) -> str:
        return "\n".join(ln for ln in text.splitlines() if not re.fullmatch(r"\d+ \d+", ln))

    assert maps(ours) == maps(theirs), f"--- bpftrace\n{theirs}\n--- pyebpf\n{ours}"


def test_usdt_strings(w: str) -> None:
    compare_with_bpftrace(f'usdt:{w}:btw:request {{ @hosts[str(arg0)] = count(); '
                          f'@len[str(arg0), arg1] = count(); }}', command=f"{w} 30 1")


def test_exit_stops_and_prints(w: str) -> None:
    compare_with_bpftrace(f'uprobe:{w}:compute /arg0 == 7/ {{ printf("seen\\n"); @n = count(); '
                          f'exit(); }}', command=f"{w} 10 1")


def test_json_output(w: str) -> None:
    compare_with_bpftrace(f'usdt:{w}:btw:delta /arg0 < 3/ {{ printf("%d\\n", arg0); '
                          f'@d[arg0] = count(); @h = hist(arg0); }} '
                          f'END {{ printf("end\\n"); }}', "-f", "json", command=f"{w} 10 1")


def test_usdt_signed_arguments(w: str) -> None:
    compare_with_bpftrace(f'usdt:{w}:btw:delta {{ @d[arg1] = count(); '
                          f'if (arg0 < 4) {{ printf("%d %d %d\\n", arg0, arg1, arg2); }} }}',
                          command=f"{w} 14 1")


def test_usdt_arguments_are_uint64_in_arithmetic(w: str) -> None:
    # bpftrace 0.17: a -4@ argument of -3 compares greater than 0 and sums
    # unsigned, while min/max stay signed and %d prints 32 bits
    compare_with_bpftrace(f'usdt:{w}:btw:delta {{ @s = sum(arg1); @lt[arg1 < 0] = count(); '
                          f'@m = min(arg1); @x = max(arg2); @a = avg(arg1); '
                          f'@c[arg1 * 2] = count(); '
                          f'printf("%ld %d %lu\\n", arg1, arg1 / 2, arg2); }}',
                          command=f"{w} 6 1")


def test_kernel_stacks(w: str) -> None:
    compare_with_bpftrace("tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { "
                          "@ks[kstack(3)] = count(); @k[kstack] = count(); }",
                          command=f"{w} 10 1")


def test_kernel_stacks_perf_mode(w: str) -> None:
    compare_with_bpftrace("tracepoint:syscalls:sys_enter_clock_nanosleep /pid == cpid/ { "
                          "@kp[kstack(perf, 2)] = count(); }", command=f"{w} 10 1")


def test_user_stack_in_printf(w: str) -> None:
    # (the process lives on after the last lock_b: bpftrace names frames only while it does)
    compare_with_bpftrace(f'uprobe:{w}:lock_b_inner {{ printf("%s\\n", ustack(2)); }}',
                          command=f"{w} 9 200000")


def test_str_lengths(w: str) -> None:
    # str(s, 4) is 4 characters (pyebpf trace gave 3), and the length may be a variable
    compare_with_bpftrace(f"usdt:{w}:btw:request {{ @f[str(arg0, 4)] = count(); "
                          f"$n = arg1 - 2; @v[str(arg0, $n)] = count(); }}", command=f"{w} 9 1")


def test_usdt_filter_with_strings_and_variables(w: str) -> None:
    # the talk's script: host and path as strings, compared with maps set in BEGIN
    compare_with_bpftrace(
        'BEGIN { @filter_host = "beta"; @filter_path = "/x"; } '
        f'usdt:{w}:btw:request {{ $host = str(arg0, arg1); $path = str(arg2, 0); '
        'if (arg2 != 0) { $path = str(arg2, arg3); } '
        'if ($path == @filter_path && $host == @filter_host) { '
        'printf("match %s %s\\n", $host, $path); } @req[$host, $path] = count(); }',
        command=f"{w} 24 1")


def test_reg_buf_print_zero_clear(w: str) -> None:
    compare_with_bpftrace(
        f'uprobe:{w}:compute /arg0 == 2/ {{ printf("%d\\n", reg("di")); }} '
        f'usdt:{w}:btw:request /arg1 == 4/ {{ printf("%r|\\n", buf(arg0, 4)); '
        f'@b[buf(arg0, 3)] = count(); }} '
        f'uretprobe:{w}:nap {{ print(retval); @z[1] = 1; zero(@z); @c[2] = 3; clear(@c); '
        f'print(@z); }}', command=f"{w} 12 1")


def test_lhist_with_a_partial_last_step(w: str) -> None:
    compare_with_bpftrace(f"uprobe:{w}:compute {{ @l = lhist(arg0, 0, 10, 3); "
                          f"@m = lhist(arg1, 1000, 4000, 700); }}", command=f"{w} 40 1")


def test_ntop_casts_and_printf_conversions(w: str) -> None:
    compare_with_bpftrace(
        f'usdt:{w}:btw:request /arg1 == 4/ {{ printf("%s\\n", ntop(0x0100007f)); '
        f'@n[ntop(arg1)] = count(); }} '
        f'uprobe:{w}:compute /arg0 == 1/ {{ @x = (int32)arg1 - 5000; @neg[-arg0] = count(); '
        f'printf("%d %u %x %ld\\n", -arg0, -arg0, 255, arg1); }}', command=f"{w} 12 1")


def test_join_argv() -> None:
    compare_with_bpftrace('tracepoint:syscalls:sys_enter_execve /pid == cpid/ { '
                          'printf("%d ", 7); join(args->argv); join(args->argv, ","); }',
                          command="/usr/bin/env /bin/true x y")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_cleared_maps(fmt: str) -> None:
    # pidpersec.bt's ending: a keyless count() map cleared prints "@: 0"
    compare_with_bpftrace('BEGIN { @ = count(); @s = sum(5); @h = hist(3); @c[1] = count(); '
                          'if (0) { @n = count(); } clear(@); clear(@s); clear(@h); clear(@c); '
                          'print(@); exit(); }', "-f", fmt, exact=True)


def test_join_takes_1023_bytes_of_each_of_16_arguments() -> None:
    # execsnoop.bt's join(args->argv): bpftrace 0.17 keeps 1023 bytes an argument
    words = " ".join(str(i) for i in range(20))
    compare_with_bpftrace('tracepoint:syscalls:sys_enter_execve /pid == cpid/ { '
                          'join(args->argv); join(args->argv, ","); }',
                          command=f"/bin/true {'A' * 1100} b {words}", exact=True)


def test_buf_and_str_of_a_run_time_length(w: str) -> None:
    # buf(p, n) of a run-time n keeps its length (printf %r, print, a map
    # value, a tuple print that many bytes; a map key all 64); n beyond 64,
    # or negative (unsigned), reads 64; str(p, n) reads n characters
    compare_with_bpftrace(
        f'usdt:{w}:btw:request /arg1 == 4/ {{ @v = buf(arg0, arg1); print(buf(arg0, arg1)); '
        f'$x = buf(arg0, arg1); printf("%r|%s|\\n", $x, str(arg0, arg1 - 1)); '
        f'printf("[%r]\\n", buf(arg0, arg1 + 100)); printf("[%r]\\n", buf(arg0, 0 - 1)); '
        f'@t[1] = (buf(arg0, arg1), 5); }} '
        f'usdt:{w}:btw:request {{ @b[buf(arg0, arg1 - 2)] = count(); '
        f'@s[str(arg0, arg1 - 1)] = count(); @z[str(arg0, arg1 - arg1)] = count(); }}',
        command=f"{w} 6 1")


def test_statements_reuse_the_stack(w: str) -> None:
    # each printf takes 200 bytes of stack for its record: four of them fit
    # in 512 bytes only when one statement's temporaries are free after it
    line = 'printf("%s %s %s\\n", str(arg0), str(arg0, 2), str(arg0, arg1 - 1));'
    compare_with_bpftrace(f'usdt:{w}:btw:request {{ {line * 4} }}', command=f"{w} 3 1")


def test_reading_counts_sums_minimums_maximums() -> None:
    # a read of an aggregation is assigned whole (a map, a variable, a tuple)
    # and compared with one of its own kind (what bpftrace 0.17 allows)
    compare_with_bpftrace(
        'BEGIN { @c = count(); @c = count(); @s[1] = sum(5); @s[1] = sum(-9); @m = min(-3); '
        '@x = max(4); @x = max(9); @d = @c; $v = @s[1]; @e[2] = $v; @mm = @m; '
        '@t = (@c, @x, 1); if (@c == @c) { printf("same\\n"); } exit(); }')


def test_kernel_structs_through_btf() -> None:
    # a cast of curtask to a kernel struct, members through pointers (->) and
    # embedded structs (.), char arrays as strings, and a tracepoint argument
    # that points to a struct in the process's memory
    import pathlib
    import sys
    napper = pathlib.Path(__file__).with_name("napper.py")
    compare_with_bpftrace(
        'tracepoint:syscalls:sys_enter_nanosleep /pid == cpid/ { '
        '$t = (struct task_struct *)curtask; '
        'printf("%d.%03d %d %s %d %d\\n", args->rqtp->tv_sec, (uint64)args->rqtp->tv_nsec / 1e6, '
        '$t->se.load.weight, $t->comm, $t->pid == (int32)tid, '
        '$t->real_parent->pid == $t->parent->pid); '
        '@n[$t->comm, args->rqtp->tv_sec] = count(); }',
        command=f"{sys.executable} {napper}")


def test_ternaries_of_strings() -> None:
    compare_with_bpftrace(
        'BEGIN { $a = 3; @s = $a > 2 ? "big" : "small"; @t[$a < 2 ? "x" : "yy"] = 1; '
        'printf("%s|\\n", $a == 3 ? "three" : "other"); exit(); }')


def test_uprobes_of_missing_functions_are_skipped(w: str) -> None:
    # bpftrace 0.17 leaves out a uprobe whose function is missing (a tool
    # written for another library version), unless nothing at all attaches
    compare_with_bpftrace(f'BEGIN {{ printf("hi\\n"); }} '
                          f'uprobe:{w}:compute, uprobe:{w}:no_such_function, '
                          f'uprobe:{w}:zzz* {{ @c[probe] = count(); }}', command=f"{w} 5 1")


def test_nothing_to_attach_is_an_error(w: str) -> None:
    from pyebpf import lang
    from pyebpf.lang.codegen import CodegenError
    prog = lang.compile(f"uprobe:{w}:no_such_function {{ }} uprobe:{w}:lock_c {{ }}")
    with pytest.raises(CodegenError, match="No probes to attach: .*no_such_function.*lock_a"):
        prog.generate()


def test_kernel_enumerators_from_btf() -> None:
    # bpftrace 0.17 resolves a bare kernel enumerator to its value, a uint64
    compare_with_bpftrace(
        'BEGIN { @x[TCP_FIN_WAIT1] = count(); @d[SKB_DROP_REASON_NOT_SPECIFIED] = sum(2); '
        'printf("%d %d\\n", TCP_CLOSE, SKB_DROP_REASON_NOT_SPECIFIED); $a = TCP_CLOSE + 1; '
        'print($a); $x = TCP_CLOSE - 10; printf("%d %s\\n", $x, $x < 0 ? "neg" : "pos"); '
        'if (TCP_CLOSE == 7) { printf("closed is 7\\n"); } exit(); }')


def test_user_symbols_are_named_in_their_own_process(w: str, tmp_path) -> None:
    # a usym/func value keeps its pid (16 bytes, as bpftrace 0.17 stores it):
    # named in a process that -c did not start (here its child), also when
    # stored in a map, a variable or a tuple first (pyebpf printed 0x...).
    # @u is printed once, after the last of its three counts (a print reads
    # the map when the tool reads the event: earlier ones race with the
    # counting). A copy of the workload of this test's own: the probe has no pid filter
    # (the child is not cpid), so no other run of it may call compute().
    w = shutil.copy(w, tmp_path / "btworkload")
    compare_with_bpftrace(
        f'uprobe:{w}:compute /arg0 < 3/ {{ @f[tid] = func; @u[usym(reg("ip"))] = count(); '
        f'@on[tid] = 1; }} '
        f'uretprobe:{w}:compute /@on[tid]/ {{ printf("%s %s\\n", @f[tid], usym(reg("ip"))); '
        f'$x = @f[tid]; print($x); @t[tid] = (1, $x); printf("%s\\n", $x); print(@t); '
        f'@n[1] = @n[1] + 1; if (@n[1] == 3) {{ print(@u); }} '
        f'delete(@on[tid]); delete(@f[tid]); delete(@t[tid]); }} '
        f'END {{ clear(@u); clear(@n); }}', command=f"{w} 9 200000 fork")


def test_user_stacks_perf_mode(w: str) -> None:
    # ustack(perf): each frame's address in the process and its module's path
    # (pyebpf printed file offsets and "([unknown])"); ASLR off (setarch -R) so
    # that both runs get the same addresses; printed while the process lives
    # (bpftrace names frames only then; @l is printed when its counts differ:
    # bpftrace prints ties in hash order)
    setarch = shutil.which("setarch")
    if setarch is None:
        pytest.skip("setarch (util-linux) is not installed")
    compare_with_bpftrace(
        f'uprobe:{w}:lock_b_inner {{ printf("%s\\n", ustack(perf, 3)); '
        f'@[ustack(perf, 3)] = count(); print(@); clear(@); }} '
        f'uprobe:libc:pthread_mutex_trylock /pid == cpid/ {{ @l[ustack(perf, 2)] = count(); '
        f'}} uprobe:{w}:nap {{ @k[1] = @k[1] + 1; if (@k[1] == 2) {{ print(@l); clear(@l); }} }}',
        command=f"{os.path.realpath(setarch)} -R {w} 9 200000")
