"""DirectorySpout (executor/spouts/directory.py): its pure ledger, the spout driven directly with a
recording collector (exact offsets, bad input, a simulated SIGKILL), and whole topologies on a
LocalCluster over real files (every line arrives, done only after every ack, replay, parallelism,
resume after a restart, a directory that appears late)."""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from collections import deque

import pytest
from testutil import CLI_ENV, ROOT, stop_process, wait_until

from daemons.local import LocalCluster
from executor.api import Bolt, InvalidTopologyError, TopologyBuilder
from executor.spouts import directory as directory_module
from executor.spouts.directory import OFFSETS_DIR, DirectorySpout, OffsetStore
from executor.spouts.directory_ledger import (
    ErrorLatch,
    FileLedger,
    LineId,
    decode_record,
    encode_record,
    files_to_read,
    is_data_name,
    line_text,
    owner_index,
    stable_hash,
)
from executor.spouts.in_flight import in_flight_limit

pytestmark = pytest.mark.timeout(90)


# ---------------------------------------------------------------- the ledger (pure)

def test_committed_offset_advances_only_over_a_contiguous_acked_prefix():
    led = FileLedger()
    for start, end in ((0, 4), (4, 9), (9, 10), (10, 15)):
        assert led.line_read(start, end)
    assert led.ack(9) and led.ack(4)
    assert (led.committed, sorted(led.acked)) == (0, [4, 9])  # line 0 still out: nothing committed
    assert led.ack(0)
    assert (led.committed, led.committed_line, led.acked) == (10, 3, set())
    assert not led.ack(0) and not led.ack(99)  # a duplicate, an unknown line
    assert led.uncommitted == 1 and not led.done
    led.reached_end(15)
    assert not led.done
    led.ack(10)
    assert led.done and led.committed == 15


def test_restored_ledger_skips_lines_acked_before_the_restart():
    led = FileLedger(committed=4, committed_line=1, acked=[9, 2])  # 2 lies before the prefix: dropped
    assert led.acked == {9}
    assert led.line_read(4, 9)        # not acked: emit
    assert not led.line_read(9, 10)   # acked before: skip
    assert led.committed == 4 and led.uncommitted == 2
    led.ack(4)
    assert (led.committed, led.committed_line, led.acked) == (10, 3, set())


def test_an_empty_file_is_done_once_its_end_is_seen():
    led = FileLedger()
    assert not led.done
    led.reached_end(0)
    assert led.done


def test_files_are_split_between_tasks_by_a_stable_hash_and_read_in_name_order():
    assert stable_hash("a.txt") == 0x872FFF54  # the same in every process and run
    parts = collections.Counter(owner_index(f"part-{i}", 4) for i in range(400))
    assert min(parts.values()) > 60, parts  # names differing in a digit spread over the tasks
    names = [f"part-{i:03d}.txt" for i in range(40)]
    listing = names + [".hidden", "_tmp", "x.done", "part-000.txt.done"]
    per_task = [files_to_read(listing, i, 3) for i in range(3)]
    read = [n for part in per_task for n in part]
    assert sorted(read) == names[1:]  # part-000 has a marker
    assert len(read) == len(set(read)) and all(part == sorted(part) for part in per_task)
    assert all(owner_index(n, 3) == i for i, part in enumerate(per_task) for n in part)
    assert files_to_read(["b", "a", "c"], 0, 1, exclude=["b"]) == ["a", "c"]
    assert [is_data_name(n) for n in ("a", ".a", "_a", "a.done", "", "a.done.txt")] == [
        True, False, False, False, False, True]


def test_in_flight_limit_is_lowered_by_max_spout_pending():
    assert in_flight_limit(1000, None) == 1000
    assert in_flight_limit(1000, 50) == 50
    assert in_flight_limit(10, 50) == 10
    assert in_flight_limit(None, None) == 1000 and in_flight_limit(None, None, exactly_once=True) == 100_000
    # exactly-once: the key bounds what runs ahead of the checkpoint under way, which holds as many
    assert in_flight_limit(None, 50, exactly_once=True) == 100


def test_line_text_strips_one_newline_and_replaces_bad_utf8():
    assert line_text(b"a\r\n") == ("a", True)
    assert line_text(b"a\n") == ("a", True)
    assert line_text(b"a") == ("a", True)
    assert line_text(b"a\r") == ("a\r", True)
    assert line_text(b"\n") == ("", True)
    assert line_text("é\n".encode()) == ("é", True)
    assert line_text(b"x\xffy\n") == ("x\ufffdy", False)


def test_offset_record_round_trips_and_refuses_another_file():
    led = FileLedger(committed=10, committed_line=3, acked=[20, 15])
    data = encode_record("f.txt", (100, 7), led)
    back = decode_record(data, "f.txt", (100, 7))
    assert (back.committed, back.committed_line, back.acked) == (10, 3, {15, 20})
    assert decode_record(data, "f.txt", (101, 7)) is None   # same name, another file
    assert decode_record(data, "g.txt", (100, 7)) is None
    for bad in (b"", b"{", b"[]", b'{"v": 1}', data.replace(b'"committed":10', b'"committed":-1'),
                data.replace(b'"committed":10', b'"committed":1000')):
        with pytest.raises(ValueError):
            decode_record(bad, "f.txt", (100, 7))


def test_error_latch_reports_again_only_after_recovery():
    latch = ErrorLatch()
    assert latch.trip("dir") and not latch.trip("dir")
    assert latch.clear("dir") and not latch.clear("dir")
    assert latch.trip("dir")


# ---------------------------------------------------------------- construction

@pytest.mark.parametrize("kwargs,needle", [
    ({"path": ""}, "path"), ({"path": None}, "path"), ({"path": b"/tmp"}, "path"),
    ({"done": "archive"}, "'marker' or 'move' or 'delete'"), ({"max_in_flight": 0}, "max_in_flight"),
    ({"poll_secs": 0}, "poll_secs"), ({"max_line_bytes": 0}, "max_line_bytes"),
])
def test_bad_arguments_are_refused_at_construction(tmp_path, kwargs, needle):
    args = {"path": tmp_path, **kwargs}
    with pytest.raises(InvalidTopologyError, match="DirectorySpout") as info:
        DirectorySpout(args.pop("path"), **args)
    assert needle in str(info.value)


def test_declares_one_field_named_line(tmp_path):
    from executor.components import OutputFieldsDeclarer
    d = OutputFieldsDeclarer("files")
    DirectorySpout(tmp_path).declare_output_fields(d)
    assert d.streams["default"][0].to_list() == ["line"]


# ---------------------------------------------------------------- the spout driven directly

class RecordingCollector:
    def __init__(self):
        self.emitted: list[tuple[str, LineId]] = []
        self.errors: list[str] = []

    def emit(self, values, stream="default", msg_id=None):
        assert stream == "default" and len(values) == 1
        self.emitted.append((values[0], msg_id))
        return [1]

    def report_error(self, exc):
        self.errors.append(str(exc))


class FakeContext:
    this_task_index = 0
    this_component_tasks = [5]


def opened(path, conf=None, **kwargs) -> tuple[DirectorySpout, RecordingCollector]:
    spout = DirectorySpout(path, poll_secs=kwargs.pop("poll_secs", 0.01), **kwargs)
    collector = RecordingCollector()
    spout.open(conf or {}, FakeContext(), collector)
    spout.activate()
    return spout, collector


def pump(spout, until, message="condition", timeout=10.0):
    """Call next_tuple until `until()` holds (the executor's loop, here on the test's thread)."""
    def step():
        spout.next_tuple()
        return until()
    return wait_until(step, timeout=timeout, message=message)


def put(directory, name, data: bytes, staging=None):
    """Write a file elsewhere and rename it into `directory` (complete when it appears)."""
    staging = staging or os.path.join(os.path.dirname(str(directory)), "staging")
    os.makedirs(staging, exist_ok=True)
    tmp = os.path.join(staging, name)
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, os.path.join(str(directory), name))


def lines(name, n):
    return "".join(f"{name}:{i}\n" for i in range(n)).encode()


def ack_all(spout, collector):
    for _, lid in list(collector.emitted):
        spout.ack(lid)


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    return d


def test_lines_offsets_and_newlines(src):
    put(src, "f.txt", b"one\r\ntwo\n\nl\xc3\xa4st")
    spout, c = opened(src)
    pump(spout, lambda: len(c.emitted) == 4)
    assert c.emitted == [("one", LineId("f.txt", 0)), ("two", LineId("f.txt", 5)), ("", LineId("f.txt", 9)),
                         ("läst", LineId("f.txt", 10))]
    assert c.emitted[1][1] == ("f.txt", 5)  # a plain tuple compares equal
    for _, lid in c.emitted[:3]:
        spout.ack(lid)
    assert not (src / "f.txt.done").exists()
    spout.ack(c.emitted[3][1])
    assert (src / "f.txt.done").exists() and (src / "f.txt.done").stat().st_size == 0
    assert not os.listdir(src / OFFSETS_DIR)  # its record is gone with it
    pump(spout, lambda: True)
    spout.close()
    assert len(c.emitted) == 4 and c.errors == []


def test_empty_file_is_done_at_once_and_skipped_names_are_never_read(src):
    put(src, "empty", b"")
    put(src, "kept", b"k\n")
    put(src, "old", b"o\n")
    (src / "old.done").write_bytes(b"")
    for name in (".hidden", "_in-progress", "x.done"):
        (src / name).write_bytes(b"no\n")
    (src / "sub").mkdir()
    (src / "sub" / "inner").write_bytes(b"no\n")
    spout, c = opened(src)
    pump(spout, lambda: (src / "empty.done").exists() and c.emitted, "the empty file's marker")
    for _ in range(20):
        spout.next_tuple()
    assert [t for t, _ in c.emitted] == ["k"]
    assert not (src / "x.done.done").exists() and not (src / "sub.done").exists()


def test_failed_line_is_replayed_with_its_id_and_the_file_completes_after_its_ack(src):
    put(src, "f", lines("f", 3))
    spout, c = opened(src)
    pump(spout, lambda: len(c.emitted) == 3)
    first = c.emitted[1]
    spout.fail(first[1])
    spout.ack(c.emitted[0][1])
    spout.ack(c.emitted[2][1])
    pump(spout, lambda: len(c.emitted) == 4)
    assert c.emitted[3] == first
    assert not (src / "f.done").exists()
    spout.fail(("nope", 0))  # unknown ids are ignored
    spout.ack(("nope", 0))
    spout.ack(first[1])
    assert (src / "f.done").exists()


def test_in_flight_is_bounded_by_max_in_flight_and_max_spout_pending(src):
    put(src, "f", lines("f", 10))
    spout, c = opened(src, max_in_flight=3)
    pump(spout, lambda: len(c.emitted) == 3)
    for _ in range(20):
        spout.next_tuple()
    assert len(c.emitted) == 3
    spout.ack(c.emitted[1][1])
    pump(spout, lambda: len(c.emitted) == 4)
    spout2, c2 = opened(src, conf={"topology.max.spout.pending": 2}, max_in_flight=3)
    pump(spout2, lambda: len(c2.emitted) == 2)
    for _ in range(20):
        spout2.next_tuple()
    assert len(c2.emitted) == 2


def test_read_ahead_past_an_unacked_line_is_bounded(src):
    put(src, "f", lines("f", 100))
    spout, c = opened(src, max_in_flight=2)

    for _ in range(50):  # every line but the first is acked as soon as it is emitted
        spout.next_tuple()
        for _, lid in c.emitted[1:]:
            spout.ack(lid)
    assert len(c.emitted) == 20  # 2 in flight * 10 lines read past line 0, no more
    spout.ack(c.emitted[0][1])

    def ack_as_they_come():
        for _, lid in c.emitted:
            spout.ack(lid)
        return (src / "f.done").exists()

    pump(spout, ack_as_they_come, "the file done")
    assert [t for t, _ in c.emitted] == [f"f:{i}" for i in range(100)]


class MethodContext:
    this_component_id = "files"

    def this_task_index(self):
        return 1

    def component_tasks(self, component_id):
        return [3, 4] if component_id == "files" else []


def test_a_context_offering_methods_is_understood(src):
    names = [f"n{i}" for i in range(20)]
    for n in names:
        put(src, n, b"x\n")
    spout = DirectorySpout(src, poll_secs=0.01)
    c = RecordingCollector()
    spout.open({}, MethodContext(), c)
    mine = sorted(n for n in names if owner_index(n, 2) == 1)
    pump(spout, lambda: len(c.emitted) == len(mine))
    assert [lid.file for _, lid in c.emitted] == mine  # name order


def test_bad_utf8_is_emitted_replaced_and_reported_once_per_file(src):
    put(src, "bad.txt", b"ok\n\xff\xfebad\nfine\n\xffagain\n")
    spout, c = opened(src)
    pump(spout, lambda: len(c.emitted) == 4)
    assert [t for t, _ in c.emitted] == ["ok", "\ufffd\ufffdbad", "fine", "\ufffdagain"]
    assert len(c.errors) == 1
    assert "bad.txt" in c.errors[0] and "line 2" in c.errors[0] and "byte offset 3" in c.errors[0]
    ack_all(spout, c)
    assert (src / "bad.txt.done").exists()


def test_over_long_line_is_reported_and_skipped(src):
    put(src, "long", b"short\n" + b"x" * 100 + b"\nafter\n" + b"y" * 11 + b"\r\n" + b"z" * 10 + b"\r\n")
    spout, c = opened(src, max_line_bytes=10)
    pump(spout, lambda: len(c.emitted) == 3)
    for _ in range(10):
        spout.next_tuple()
    assert [t for t, _ in c.emitted] == ["short", "after", "z" * 10]
    assert len(c.errors) == 1 and "long" in c.errors[0] and "line 2" in c.errors[0] and "byte offset 6" in c.errors[0]
    ack_all(spout, c)
    assert (src / "long.done").exists()


def test_done_move_and_delete(tmp_path):
    for mode in ("move", "delete"):
        d = tmp_path / mode
        d.mkdir()
        put(d, "f", b"a\n")
        if mode == "move":
            (d / "done").mkdir()
            (d / "done" / "f").write_bytes(b"an earlier f\n")
        spout, c = opened(d, done=mode)
        pump(spout, lambda c=c: c.emitted)
        assert (d / "f").exists()
        ack_all(spout, c)
        assert not (d / "f").exists() and not (d / "f.done").exists()
        if mode == "move":
            assert (d / "done" / "f.1").read_bytes() == b"a\n"
            assert (d / "done" / "f").read_bytes() == b"an earlier f\n"
        for _ in range(20):
            spout.next_tuple()  # the done/ directory is never read
        assert len(c.emitted) == 1 and c.errors == []


def record(src, name):
    st = (src / name).stat()
    data = OffsetStore(str(src / OFFSETS_DIR)).load(name)
    return decode_record(data, name, (st.st_size, st.st_mtime_ns)) if data else None


def test_resume_after_a_simulated_sigkill_replays_only_unacked_lines(src):
    put(src, "f", lines("f", 10))
    a, ca = opened(src)
    pump(a, lambda: len(ca.emitted) == 10)
    acked = [0, 1, 2, 3, 6, 8]
    for i in acked:
        a.ack(ca.emitted[i][1])
    offsets = [lid.offset for _, lid in ca.emitted]
    # the periodic write (no deactivate, no close: the worker is killed after it)
    pump(a, lambda: (r := record(src, "f")) and r.committed == offsets[4] and r.acked == {offsets[6], offsets[8]},
         "the offsets to be written")
    b, cb = opened(src)  # `a` is abandoned, as a killed worker is
    pump(b, lambda: len(cb.emitted) == 4)
    for _ in range(20):
        b.next_tuple()
    assert [t for t, _ in cb.emitted] == ["f:4", "f:5", "f:7", "f:9"]
    assert [lid for _, lid in cb.emitted] == [ca.emitted[i][1] for i in (4, 5, 7, 9)]
    ack_all(b, cb)
    assert (src / "f.done").exists() and record(src, "f") is None


def test_close_writes_the_offsets_at_once(src):
    put(src, "f", lines("f", 5))
    a, ca = opened(src)
    pump(a, lambda: len(ca.emitted) == 5)
    a.next_tuple()  # a write now: the acks below fall within the write interval
    for i in (0, 2):
        a.ack(ca.emitted[i][1])
    a.deactivate()
    a.close()
    b, cb = opened(src)
    pump(b, lambda: len(cb.emitted) == 3)
    assert [t for t, _ in cb.emitted] == ["f:1", "f:3", "f:4"]


def test_a_stale_record_for_a_replaced_file_is_ignored(src):
    put(src, "f", lines("f", 4))
    a, ca = opened(src)
    pump(a, lambda: len(ca.emitted) == 4)
    a.ack(ca.emitted[0][1])
    a.close()
    put(src, "f", lines("new", 6))  # another file of the same name (before the first was done)
    b, cb = opened(src)
    pump(b, lambda: len(cb.emitted) == 6)
    assert cb.emitted[0][0] == "new:0"


def test_file_deleted_while_being_read_is_reported_once_and_dropped(src):
    put(src, "a", lines("a", 10))
    put(src, "b", lines("b", 3))
    spout, c = opened(src, max_in_flight=2)
    pump(spout, lambda: len(c.emitted) == 2)
    os.unlink(src / "a")
    pump(spout, lambda: c.errors, "the vanished file's report")
    assert len(c.errors) == 1 and str(src / "a") in c.errors[0] and "vanished" in c.errors[0]
    for _, lid in c.emitted[:2]:
        spout.ack(lid)  # acks of dropped lines are ignored
        spout.fail(lid)
    pump(spout, lambda: len(c.emitted) == 4, "b's first lines")  # two in flight at most
    for _, lid in c.emitted[2:]:
        spout.ack(lid)
    pump(spout, lambda: len(c.emitted) == 5, "b's last line")
    spout.ack(c.emitted[4][1])
    assert [t for t, _ in c.emitted[2:]] == ["b:0", "b:1", "b:2"]
    assert (src / "b.done").exists() and not (src / "a.done").exists()
    for _ in range(20):
        spout.next_tuple()
    assert len(c.emitted) == 5 and len(c.errors) == 1
    assert not os.listdir(src / OFFSETS_DIR)


def test_missing_directory_is_reported_once_until_it_recovers_and_breaks_again(tmp_path):
    d = tmp_path / "later"
    spout, c = opened(d)
    assert len(c.errors) == 1 and str(d) in c.errors[0]  # said at open
    for _ in range(30):
        spout.next_tuple()
    assert len(c.errors) == 1 and str(d) in c.errors[0]
    assert not d.exists()  # never created by the spout
    d.mkdir()
    put(d, "f", b"x\n")
    pump(spout, lambda: c.emitted, "a line once the directory exists")
    ack_all(spout, c)
    shutil.rmtree(d)
    pump(spout, lambda: len(c.errors) == 2, "the second report")
    for _ in range(30):
        spout.next_tuple()
    assert len(c.errors) == 2 and str(d) in c.errors[1]


def test_unreadable_file_is_reported_once_and_read_once_it_can_be(src, monkeypatch):
    put(src, "a", b"a\n")
    put(src, "b", b"b\n")
    real_open = open

    def refusing(path, *args, **kwargs):
        if str(path) == str(src / "a"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(directory_module, "open", refusing, raising=False)
    spout, c = opened(src)
    pump(spout, lambda: c.emitted, "b's line")
    for _ in range(30):
        spout.next_tuple()
    assert [t for t, _ in c.emitted] == ["b"]
    assert len(c.errors) == 1 and str(src / "a") in c.errors[0] and "Permission denied" in c.errors[0]
    monkeypatch.undo()
    pump(spout, lambda: len(c.emitted) == 2, "a's line once readable")
    ack_all(spout, c)
    assert (src / "a.done").exists() and (src / "b.done").exists()


def test_unwritable_offsets_are_reported_once_and_reading_goes_on(src):
    (src / OFFSETS_DIR).write_bytes(b"")  # a file where the bookkeeping directory should be
    put(src, "f", lines("f", 3))
    spout, c = opened(src)
    pump(spout, lambda: len(c.emitted) == 3)
    ack_all(spout, c)
    pump(spout, lambda: (src / "f.done").exists())
    assert len(c.errors) == 1 and OFFSETS_DIR in c.errors[0]


# ---------------------------------------------------------------- on a LocalCluster
# (tests/local/local_helpers.py's pattern; that module is importable only from tests/local)

class Shared:
    """State shared between the test and the per-task copies of a component (never copied)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen: list = []
        self.held: list = []
        self.events: list = []
        self.commands: deque = deque()

    def __deepcopy__(self, memo):
        return self

    def run(self, fn) -> None:
        """Have the HoldBolt run fn(collector, held) on its own thread, at its next tick."""
        self.commands.append(fn)


class HoldBolt(Bolt):
    """Holds every input; the test acks them through Shared.run."""

    def __init__(self, shared):
        self.shared = shared

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 0.05}

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup.is_tick():
            while self.shared.commands:
                self.shared.commands.popleft()(self.collector, self.shared.held)
            return
        with self.shared.lock:
            self.shared.held.append(tup)
            self.shared.seen.append(tup.values[0])


class AckBolt(Bolt):
    """Acks every input, recording its line."""

    def __init__(self, shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        with self.shared.lock:
            self.shared.seen.append(tup.values[0])
        self.collector.ack(tup)


class RecordingSpout(DirectorySpout):
    """Records the acks and fails the spout received (to know an ack has arrived)."""

    def __init__(self, shared, path, **kwargs):
        super().__init__(path, **kwargs)
        self.shared = shared

    def ack(self, msg_id):
        super().ack(msg_id)
        with self.shared.lock:
            self.shared.events.append(("ack", tuple(msg_id)))

    def fail(self, msg_id):
        super().fail(msg_id)
        with self.shared.lock:
            self.shared.events.append(("fail", tuple(msg_id)))


def acks(shared) -> int:
    return sum(1 for e in list(shared.events) if e[0] == "ack")


class FailFirstBolt(Bolt):
    """Fails every third line the first time it sees it, acks everything else."""

    def __init__(self, shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        line = tup.values[0]
        with self.shared.lock:
            first = line not in self.shared.seen
            self.shared.seen.append(line)
        if first and int(line.rsplit(":", 1)[1]) % 3 == 0:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def topology(spout, bolt, parallelism=1):
    b = TopologyBuilder()
    b.set_spout("files", spout, parallelism)
    b.set_bolt("sink", bolt, parallelism).shuffle_grouping("files")
    return b.create_topology()


def expected_lines(files: dict[str, int]) -> list[str]:
    return sorted(f"{name}:{i}" for name, n in files.items() for i in range(n))


def put_all(src, files: dict[str, int]):
    for name, n in files.items():
        put(src, name, lines(name, n))


@pytest.mark.parametrize("done", ["marker", "move", "delete"])
def test_every_line_arrives_and_files_are_done_only_after_every_ack(src, done):
    files = {"a.txt": 40, "b.txt": 25, "c.txt": 1}
    put_all(src, files)
    shared, hold = Shared(), Shared()
    spout = RecordingSpout(shared, src, done=done)

    def finished(name):
        return {"marker": (src / f"{name}.done").exists(), "move": (src / "done" / name).exists(),
                "delete": not (src / name).exists()}[done]

    with LocalCluster() as cluster:
        cluster.submit_topology("dir", {}, topology(spout, HoldBolt(hold)))
        wait_until(lambda: len(hold.seen) == 66, timeout=30, message=lambda: f"lines held: {len(hold.seen)}")
        assert sorted(hold.seen) == expected_lines(files)
        assert not any(finished(n) for n in files)
        # ack everything but a.txt's line 7: b and c complete, a does not
        hold.run(lambda col, held: [col.ack(t) for t in held if t.values[0] != "a.txt:7"])
        wait_until(lambda: acks(shared) == 65, timeout=30, message="65 acks at the spout")
        wait_until(lambda: finished("b.txt") and finished("c.txt"), timeout=10, message="b and c done")
        assert not finished("a.txt")
        hold.run(lambda col, held: [col.ack(t) for t in held if t.values[0] == "a.txt:7"])
        wait_until(lambda: finished("a.txt"), timeout=30, message="a done after its last ack")
        assert cluster.errors("dir") == [] and cluster.died("dir") == []
    assert len(hold.seen) == 66  # nothing emitted twice
    assert not os.listdir(src / OFFSETS_DIR)


def test_failed_lines_are_replayed_and_every_file_completes(src):
    files = {f"f{i}": 30 for i in range(4)}
    put_all(src, files)
    shared = Shared()
    with LocalCluster() as cluster:
        cluster.submit_topology("replay", {}, topology(RecordingSpout(shared, src), FailFirstBolt(shared)))
        wait_until(lambda: all((src / f"{n}.done").exists() for n in files), timeout=60,
                   message=lambda: f"markers; {len(shared.seen)} lines seen, events {len(shared.events)}")
        assert cluster.errors("replay") == []
    seen = collections.Counter(shared.seen)
    assert sorted(seen) == expected_lines(files)
    for line, n in seen.items():
        assert n == (2 if int(line.rsplit(":", 1)[1]) % 3 == 0 else 1), (line, n)
    assert sum(1 for e in shared.events if e[0] == "fail") == 40


def test_two_tasks_read_each_line_once(src):
    files = {f"part-{i}.log": 50 for i in range(8)}
    assert {owner_index(n, 2) for n in files} == {0, 1}  # both tasks get files
    put_all(src, files)
    shared = Shared()
    with LocalCluster() as cluster:
        cluster.submit_topology("par", {"topology.workers": 2}, topology(DirectorySpout(src), AckBolt(shared), 2))
        wait_until(lambda: all((src / f"{n}.done").exists() for n in files), timeout=60,
                   message=lambda: f"markers; {len(shared.seen)} lines seen")
        assert cluster.errors("par") == []
    seen = collections.Counter(shared.seen)
    assert sorted(seen) == expected_lines(files) and set(seen.values()) == {1}


def test_without_ackers_every_line_arrives_once_and_files_are_done(src):
    files = {"x": 30, "y": 0, "z": 3}
    put_all(src, files)
    shared = Shared()
    with LocalCluster() as cluster:
        cluster.submit_topology("noack", {"topology.acker.executors": 0}, topology(DirectorySpout(src), AckBolt(shared)))
        wait_until(lambda: all((src / f"{n}.done").exists() for n in files), timeout=30, message="markers")
        wait_until(lambda: len(shared.seen) == 33, timeout=30, message="every line")  # emits acked at once
        assert cluster.errors("noack") == []
    assert sorted(shared.seen) == expected_lines(files)


def test_a_new_cluster_resumes_mid_file_without_replaying_acked_lines(src):
    put_all(src, {"a.txt": 20, "b.txt": 5})
    first, hold = Shared(), Shared()
    acked = {f"a.txt:{i}" for i in (*range(8), 10, 12)} | {f"b.txt:{i}" for i in range(5)}
    with LocalCluster() as cluster:
        cluster.submit_topology("resume", {}, topology(RecordingSpout(first, src), HoldBolt(hold)))
        wait_until(lambda: len(hold.seen) == 25, timeout=30, message="all lines held")
        hold.run(lambda col, held: [col.ack(t) for t in held if t.values[0] in acked])
        wait_until(lambda: acks(first) == len(acked), timeout=30, message="the acks at the spout")
        wait_until(lambda: (src / "b.txt.done").exists(), timeout=10, message="b done")
        assert not (src / "a.txt.done").exists()
    # the first cluster is gone (its spout deactivated and closed); the held lines were never acked
    second = Shared()
    with LocalCluster() as cluster:
        cluster.submit_topology("resume", {}, topology(DirectorySpout(src), AckBolt(second)))
        wait_until(lambda: (src / "a.txt.done").exists(), timeout=30, message="a done on the second run")
        assert cluster.errors("resume") == []
    assert sorted(second.seen) == sorted(f"a.txt:{i}" for i in range(20) if f"a.txt:{i}" not in acked)
    assert not os.listdir(src / OFFSETS_DIR)


def test_a_directory_absent_at_start_is_reported_and_read_once_it_appears(tmp_path):
    src = tmp_path / "incoming"
    shared = Shared()
    with LocalCluster() as cluster:
        cluster.submit_topology("late", {}, topology(DirectorySpout(src), AckBolt(shared)))
        wait_until(lambda: any(str(src) in e.error for e in cluster.errors("late")), timeout=30,
                   message="an error naming the directory")
        src.mkdir()
        put(src, "f", lines("f", 10))
        wait_until(lambda: (src / "f.done").exists(), timeout=30, message="the file done")
        errors = [e for e in cluster.errors("late") if str(src) in e.error]
        assert len(errors) == 1 and errors[0].component_id == "files", errors
        assert cluster.died("late") == []
    assert sorted(shared.seen) == expected_lines({"f": 10})


# ---------------------------------------------------------------- a real SIGKILL (storm-py local)

KILL_TOPOLOGY = textwrap.dedent("""
    import os, time
    from executor.api import Bolt, TopologyBuilder
    from executor.spouts.directory import DirectorySpout

    class Record(Bolt):
        def get_component_configuration(self):
            return {"topology.executor.thread.mode": "dedicated"}  # it sleeps

        def prepare(self, conf, context, collector):
            self.collector = collector
            self.out = open(os.environ["DIRSPOUT_OUT"], "a")
            self.pause = float(os.environ["DIRSPOUT_PAUSE"])

        def execute(self, tup):
            self.out.write(tup.values[0] + "\\n")
            self.out.flush()  # in the kernel before the ack: survives SIGKILL
            time.sleep(self.pause)
            self.collector.ack(tup)

    builder = TopologyBuilder()
    builder.set_spout("files", DirectorySpout(os.environ["DIRSPOUT_IN"]))
    builder.set_bolt("record", Record()).shuffle_grouping("files")
    topology = builder.create_topology()
    config = {"topology.max.spout.pending": 50}
""")


def run_local(topo, env, out):
    return subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", str(topo), "--duration", "120"],
                            cwd=ROOT, env={**CLI_ENV, **env}, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def output_lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.cluster
def test_after_sigkill_a_rerun_emits_no_line_the_offset_record_has_as_acked(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    n = 5000
    put(src, "big", "".join(f"big:{i:06d}\n" for i in range(n)).encode())  # 11 bytes a line
    topo = tmp_path / "topo" / "topology.py"
    topo.parent.mkdir()
    topo.write_text(KILL_TOPOLOGY)
    first_out, second_out = tmp_path / "first.txt", tmp_path / "second.txt"
    log1, log2 = open(tmp_path / "run1.log", "wb"), open(tmp_path / "run2.log", "wb")
    env = {"DIRSPOUT_IN": str(src), "DIRSPOUT_OUT": str(first_out), "DIRSPOUT_PAUSE": "0.002"}
    proc = run_local(topo, env, log1)
    try:
        def a_record_mid_file():
            rec = record(src, "big")
            return rec is not None and rec.committed >= 200 * 11 and len(output_lines(first_out)) < n
        wait_until(a_record_mid_file, timeout=60, message=lambda: (tmp_path / "run1.log").read_text()[-2000:])
    finally:
        stop_process(proc, 10, "storm-py local (first run)", sig=signal.SIGKILL)
        log1.close()
    rec = record(src, "big")  # what the rerun resumes from
    acked = set(range(rec.committed // 11)) | {off // 11 for off in rec.acked}
    assert not (src / "big.done").exists() and 0 < len(acked) < n
    proc = run_local(topo, {**env, "DIRSPOUT_OUT": str(second_out), "DIRSPOUT_PAUSE": "0"}, log2)
    try:
        wait_until(lambda: (src / "big.done").exists(), timeout=60,
                   message=lambda: (tmp_path / "run2.log").read_text()[-2000:])
    finally:
        stop_process(proc, 30, "storm-py local (second run)")
        log2.close()
    first = {int(x.split(":")[1]) for x in output_lines(first_out)}
    second = collections.Counter(int(x.split(":")[1]) for x in output_lines(second_out))
    assert acked <= first                       # acked lines were processed, in the first run
    assert not acked & set(second)              # ... and none of them is emitted again
    assert set(second) == set(range(n)) - acked  # every other line is
    assert set(second.values()) == {1}
    assert record(src, "big") is None
