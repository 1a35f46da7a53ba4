"""A stateful windowed bolt's windows split over a new number of tasks (executor/windowing/rescale.py),
pure: each tuple follows its key to the task the grouping now picks, and every (key, window) is
handed out once with exactly the tuples a single task would have given it, whatever each old task
had already fired (checked against a brute-force computation over random timestamps)."""

import random
from collections import defaultdict

import pytest

from executor.windowing import spec as S
from executor.windowing.manager import WindowManager
from executor.windowing.rescale import can_split, split
from executor.windowing.spec import window_spec

pytestmark = pytest.mark.timeout(30)


def _spec(**conf):
    return window_spec("count", conf)


def _by_key(fired, into):
    for f in fired:
        keys = defaultdict(list)
        for key, ts, i in f.window:
            keys[key].append((ts, i))
        for key, items in keys.items():
            into[(key, f.end)].append(sorted(items))


@pytest.mark.parametrize("seed", range(8))
def test_split_windows_hand_out_each_key_s_windows_once_with_what_a_single_task_would(seed):
    rng = random.Random(seed)
    length, slide = rng.choice([(100, 100), (100, 25), (60, 20)])
    spec = _spec(**{S.LENGTH_DURATION_KEY: length, S.SLIDING_DURATION_KEY: slide, S.TIMESTAMP_FIELD_KEY: "ts"})
    old_tasks, new_tasks = rng.choice([(2, 3), (3, 2), (1, 4), (4, 1)])
    keys = [f"k{i}" for i in range(9)]
    old_of = {k: rng.randrange(old_tasks) for k in keys}
    new_of = {k: rng.randrange(new_tasks) for k in keys}
    items = sorted(((rng.choice(keys), rng.randrange(1, 1000), i) for i in range(400)), key=lambda x: x[1])
    cut = rng.randrange(100, 300)
    while items[cut][1] == items[cut - 1][1]:  # later tuples are not late for any old task's watermark
        cut += 1
    before, after = items[:cut], items[cut:]
    old = [WindowManager(spec) for _ in range(old_tasks)]
    got = defaultdict(list)
    for item in before:
        old[old_of[item[0]]].add(item, item[1])
    # each old task's watermark is its own (its inputs' newest timestamps): they fired up to different ends
    newest = before[-1][1]
    for m in old:
        _by_key(m.on_watermark(newest - rng.randrange(0, 150)).fired, got)
    snapshots = split(spec, [m.snapshot(lambda x: x) for m in old], lambda item: new_of[item[0]], new_tasks)
    new = []
    for snap in snapshots:
        m = WindowManager(spec)
        if snap is not None:
            m.restore(snap, lambda x: x)
        new.append(m)
    for item in after:
        new[new_of[item[0]]].add(item, item[1])
    for m in new:
        _by_key(m.on_watermark(2000).fired, got)
    want = defaultdict(list)
    for end in range(slide, 2000 + 1, slide):
        for key in keys:
            inside = sorted((ts, i) for k, ts, i in items if k == key and end - length < ts <= end)
            if inside:
                want[(key, end)].append(inside)
    assert dict(got) == dict(want)


def test_tuples_that_left_or_were_handed_out_leave_with_their_keys_next_window():
    spec = _spec(**{S.LENGTH_DURATION_KEY: 100, S.TIMESTAMP_FIELD_KEY: "ts"})  # tumbling
    m = WindowManager(spec)
    for i, (key, ts) in enumerate([("a", 10), ("b", 20), ("a", 150), ("b", 250)]):
        m.add((key, ts, i), ts)
    m.on_watermark(100)   # (0, 100] handed out
    m.on_watermark(200)   # (100, 200] handed out (a@10 and b@20 left with it); a@150 waits to leave
    snaps = split(spec, [m.snapshot(lambda x: x)], lambda item: 0 if item[0] == "a" else 1, 2)
    assert [[x[:2] for x in s[6]] for s in snaps] == [[("a", 150)], []]
    assert [[e[2][:2] for e in s[0]] for s in snaps] == [[], [("b", 250)]]


@pytest.mark.parametrize("seed", range(8))
def test_processing_time_tumbling_windows_hand_out_each_tuple_once_across_a_split(seed):
    rng = random.Random(seed)
    spec = _spec(**{S.LENGTH_DURATION_KEY: 500})
    old = [WindowManager(spec) for _ in range(2)]
    seen = []
    for t, m in enumerate(old):
        m.on_time(1000.0 + 137 * t)  # each task's grid starts at its first tick
    items = [(f"k{rng.randrange(6)}", 1000.0 + i * 7, i) for i in range(200)]
    old_of = {f"k{i}": rng.randrange(2) for i in range(6)}
    for item in items[:120]:
        old[old_of[item[0]]].add(item, item[1])
    for t, m in enumerate(old):
        seen += [x for f in m.on_time(1700.0 + 90 * t).fired for x in f.window]
    snaps = split(spec, [m.snapshot(lambda x: x) for m in old], lambda item: int(item[0][1:]) % 3, 3)
    new = []
    for snap in snaps:
        m = WindowManager(spec)
        if snap is not None:
            m.restore(snap, lambda x: x)
            m.restamp(5_000.0)
        new.append(m)
    for item in items[120:]:
        new[int(item[0][1:]) % 3].add(item, 5_000.0 + item[2])
    for m in new:
        seen += [x for f in m.on_time(10_000.0).fired for x in f.window]
    assert sorted(x[2] for x in seen) == list(range(200))


def test_count_windows_and_tuples_kept_one_by_one_are_not_split():
    assert "counted in tuples per task" in can_split(_spec(**{S.LENGTH_COUNT_KEY: 10}))
    assert "counted in tuples per task" in can_split(_spec(**{S.LENGTH_DURATION_KEY: 100, S.SLIDING_COUNT_KEY: 5}))
    assert "processing time" in can_split(_spec(**{S.LENGTH_DURATION_KEY: 100, S.SLIDING_DURATION_KEY: 50}))
    assert can_split(_spec(**{S.LENGTH_DURATION_KEY: 100})) is None
    assert can_split(_spec(**{S.LENGTH_DURATION_KEY: 100, S.SLIDING_DURATION_KEY: 50, S.TIMESTAMP_FIELD_KEY: "ts"})) is None
