"""The Python API: compile, start (a context manager), events as records,
maps as Python data, stop -- no subprocess."""
from __future__ import annotations

import pytest

from pyebpf import lang
from pyebpf.errors import PyebpfError

from .harness import bt_workload

# (each test that needs the kernel is marked `kernel`; the others run under every Python)


@pytest.fixture(scope="module")
def w() -> str:
    return bt_workload()


@pytest.mark.kernel
def test_maps_as_python_data(w: str) -> None:
    prog = lang.compile(f"uprobe:{w}:compute /arg0 < 3/ {{ @c[arg0] = count(); "
                        f"@two[arg0, arg0 * 2] = sum(arg0); @h = hist(arg0); "
                        f"@l = lhist(arg0, 0, 3, 1); @st = stats(arg0); @a = avg(arg0); }}")
    with prog.start([w, "30", "1"]) as run:
        events = list(run)          # until the command exits
        run.stop()
        maps = run.maps()
    assert events == []
    assert maps["@c"] == {0: 3, 1: 3, 2: 3}
    assert maps["@two"] == {(0, 0): 0, (1, 2): 3, (2, 4): 6}
    assert maps["@h"] == {(0, 1): 3, (1, 2): 3, (2, 4): 3}
    assert maps["@l"] == {(0, 1): 3, (1, 2): 3, (2, 3): 3}
    assert maps["@st"] == (9, 1, 9)
    assert maps["@a"] == 1


@pytest.mark.kernel
def test_events_are_records(w: str) -> None:
    prog = lang.compile(f'usdt:{w}:btw:request /arg1 == 4/ {{ '
                        f'printf("%s %d\\n", str(arg0), arg1); }}')
    with prog.start([w, "6", "1"]) as run:
        events = list(run)
    assert [(e.kind, e.values, e.text) for e in events] == [
        ("printf", ("beta", 4), "beta 4\n"), ("printf", ("beta", 4), "beta 4\n")]


@pytest.mark.kernel
def test_stop_detaches_and_runs_end() -> None:
    prog = lang.compile('BEGIN { @b = 1; } END { @e = 2; printf("bye\\n"); }')
    with prog.start() as run:
        assert run.maps() == {"@b": 1}
        run.stop()
        assert [e.text for e in run.poll(0)] == ["bye\n"]
        assert run.maps() == {"@b": 1, "@e": 2}


def test_show_needs_no_kernel_objects() -> None:
    text = lang.compile("BEGIN { @x[pid] = count(); }").show()
    assert "; probe BEGIN" in text and "bt0_x" in text


def test_bad_program_is_a_pyebpf_error() -> None:
    with pytest.raises(PyebpfError) as info:
        lang.compile("BEGIN { @x = ; }")
    assert "stdin:1:" in str(info.value)


@pytest.mark.kernel
def test_close_releases_everything(w: str, no_fd_leak: None) -> None:
    prog = lang.compile(f"uprobe:{w}:compute {{ @c = count(); }} "
                        f"usdt:{w}:btw:delta {{ printf(\"%d\\n\", arg0); }}")
    with prog.start([w, "5", "1"]) as run:
        list(run)


@pytest.mark.kernel
def test_probes_keep_running_until_exit_is_read(w: str) -> None:
    # as in bpftrace, exit() stops nothing in the kernel: the probe declared
    # after it on the same call still runs (it printed nothing before issue 25)
    prog = lang.compile(f"uprobe:{w}:compute /arg0 == 7/ {{ exit(); }} "
                        f"uprobe:{w}:compute /arg0 == 7/ {{ @after = 1; }}")
    with prog.start([w, "400", "1"]) as run:
        events = list(run)
        run.stop()
        assert run.maps()["@after"] == 1
    assert [e.kind for e in events] == ["exit"]


def test_probes_of_one_event_fire_in_the_declared_order(w: str) -> None:
    for second in ("uprobe", "uretprobe"):
        prog = lang.compile(f'{second}:{w}:compute {{ @seen = 1; }} '
                            f'{second}:{w}:compute /@seen/ {{ printf("first\\n"); }} '
                            f'{second}:{w}:compute /@seen/ {{ printf("second\\n"); exit(); }}')
        with prog.start([w, "50", "1"]) as run:
            texts = [e.text for e in run]
        assert texts[:2] == ["first\n", "second\n"], (second, texts)


def test_begin_runs_before_any_probe_is_attached() -> None:
    import os
    # BEGIN runs through a bpf() call of this process: attached before it, the
    # tracepoint would see @began still 0
    prog = lang.compile("BEGIN { @began = 1; } tracepoint:syscalls:sys_enter_bpf "
                        f"/pid == {os.getpid()}/ {{ @seen[@began] = count(); }}")
    with prog.start() as run:
        run.poll(0)
        run.stop()
        assert 0 not in (run.maps().get("@seen") or {})


@pytest.mark.kernel
def test_begun_sees_begins_events_before_the_probes_are_attached(w: str) -> None:
    # what `pyebpf bt` prints its first event from: BEGIN has run, no probe
    # is attached yet (the kernel's wait at the first uprobe comes after)
    seen: list[tuple[list[str], int]] = []

    def begun(run: lang.BtRun) -> None:
        seen.append(([e.text for e in run.poll(0)], len(run.links)))

    prog = lang.compile(f'BEGIN {{ printf("go\\n"); }} uprobe:{w}:compute {{ @c = count(); }}')
    with prog.start(begun=begun) as run:
        assert seen == [(["go\n"], 0)]
        assert len(run.links) == 1


def test_show_names_skipped_probes_and_the_deepest_stack() -> None:
    from .harness import bt_workload
    w = bt_workload()
    text = lang.compile(f"BEGIN {{ @a[str(0), str(0)] = 1; @b[str(0), str(0)] = 2; }} "
                        f'uprobe:{w}:compute, uprobe:{w}:no_such_function {{ }}').show()
    assert f"; skipped (as bpftrace skips it): uprobe:{w}: nothing matches " \
           "'no_such_function'" in text
    # the statements reuse the stack: the frame is one key and value deep
    stack = int(text.split(" bytes of stack")[0].rsplit(", ", 1)[1])
    assert 136 <= stack < 272, stack
