"""A process's start on the boot clock (daemons/process_start.py), read from a fake /proc."""

import pytest

from daemons import process_start as ps
from daemons.process_start import ProcessStart, process_start, same_process

BOOT = "7673aee2-d0b6-4cf7-a309-1147e1ada66f"


@pytest.fixture
def fake_proc(tmp_path, monkeypatch):
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text(BOOT + "\n")
    # A btime that says nothing true: the boot clock must not read it.
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1\n")
    monkeypatch.setattr(ps, "_PROC", str(tmp_path))
    monkeypatch.setattr(ps, "_TICKS", 100)
    ps._boot_id.cache_clear()
    yield tmp_path
    ps._boot_id.cache_clear()


def _stat(proc, pid, comm, ticks):
    (proc / str(pid)).mkdir()
    rest = ["S", "1", "2", "3", "0", "-1", "4194560"] + ["0"] * 12 + [str(ticks), "123456", "789"]
    (proc / str(pid) / "stat").write_bytes(f"{pid} ({comm}) ".encode() + " ".join(rest).encode() + b"\n")


def test_the_start_is_the_ticks_since_boot_even_when_the_command_name_has_spaces_and_parentheses(fake_proc):
    _stat(fake_proc, 41, "python3", 250_000)
    _stat(fake_proc, 42, "a) (b c", 250_003)  # a name may end with ") (" itself
    assert process_start(41) == ProcessStart(BOOT, 2500.0)
    assert process_start(42) == ProcessStart(BOOT, 2500.03)
    assert process_start(43) is None  # no such process


def test_one_process_is_the_same_on_two_looks_and_another_boot_never_is():
    a = ProcessStart(BOOT, 2500.03)
    assert same_process(a, ProcessStart(BOOT, 2500.03))
    assert not same_process(a, ProcessStart(BOOT, 2500.04))  # a reused pid, started a tick later
    assert not same_process(a, ProcessStart("another-boot", 2500.03))
    # No boot id (not Linux): psutil's wall-clock create times, within a second.
    assert same_process(ProcessStart("", 1.7e9), ProcessStart("", 1.7e9 + 0.5))
    assert not same_process(ProcessStart("", 1.7e9), ProcessStart("", 1.7e9 + 2))


def test_a_start_is_written_and_read_as_text():
    start = ProcessStart(BOOT, 2500.03)
    assert ProcessStart.from_text(start.to_text()) == start
    assert ProcessStart.from_text(ProcessStart("", 1.7e9).to_text()) == ProcessStart("", 1.7e9)
    with pytest.raises(ValueError, match="not a process start"):
        ProcessStart.from_text("1796320316.2")
