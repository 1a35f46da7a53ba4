"""Unit tests for executor/grouping.py: hashing, grouper distribution/consistency, split_tasks."""

from __future__ import annotations

import enum
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from executor.grouping import (
    AllGrouper,
    FieldsGrouper,
    GlobalGrouper,
    LocalityAwareShuffleGrouper,
    LocalOrShuffleGrouper,
    PartialKeyGrouper,
    ShuffleGrouper,
    hash_values,
    mix32,
    split_tasks,
    stable_hash,
)
from executor.tuple import Fields

REPO_ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- stable_hash

@pytest.mark.parametrize("value", [
    "word", "", "caf\u00e9 \u4e2d\u6587 \U0001f600", b"bytes", b"", 0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1,
    1.5, -0.25, float("inf"), True, False, None, [1, "a"], ("a", 1), {"k": [1, 2]}, [],
])
def test_stable_hash_is_32_bit_and_repeatable(value):
    h = stable_hash(value)
    assert isinstance(h, int)
    assert 0 <= h <= 0xFFFFFFFF
    assert stable_hash(value) == h


def test_stable_hash_equal_values_hash_equal():
    # values that compare equal (or become equal after msgpack) must hash equally
    assert stable_hash(1.0) == stable_hash(1)
    assert stable_hash(-0.0) == stable_hash(0.0) == stable_hash(0)
    assert stable_hash(("a", 1, b"x")) == stable_hash(["a", 1, b"x"])  # msgpack turns tuples into lists
    assert stable_hash(bytearray(b"abc")) == stable_hash(b"abc")
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})  # order-independent
    assert stable_hash("x" * 3) == stable_hash("xxx")


def test_stable_hash_distinguishes_common_values():
    words = [f"word{i}" for i in range(1000)]
    assert len({stable_hash(w) for w in words}) > 990
    assert stable_hash(True) != stable_hash(False)
    assert stable_hash(1.5) != stable_hash(2.5)


@pytest.mark.parametrize("value,type_name", [
    (object(), "object"),
    ({1, 2}, "set"),
    (frozenset([1]), "frozenset"),
    (complex(1, 2), "complex"),
])
def test_stable_hash_unsupported_type_raises_type_error_naming_type(value, type_name):
    with pytest.raises(TypeError, match=type_name):
        stable_hash(value)


class _Color(str, enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Name(str):
    pass


@pytest.mark.parametrize("value,plain", [(_Color.RED, "red"), (_Level.HIGH, 3), (_Name("bob"), "bob")])
def test_stable_hash_of_str_and_int_subclasses_matches_plain_value(value, plain):
    from executor.serialization import check_values

    assert check_values([value]) is None  # accepted at emit...
    assert stable_hash(value) == stable_hash(plain)  # ...so grouping must handle it like the wire value


def test_stable_hash_unsupported_type_nested_in_list_raises():
    with pytest.raises(TypeError, match="set"):
        stable_hash(["ok", {1}])
    with pytest.raises(TypeError, match="object"):
        hash_values([1, object()])


# ---------------------------------------------------------------- shuffle

def test_shuffle_spreads_evenly_over_many_emits():
    targets = [3, 4, 5, 6, 7, 8, 9]
    g = ShuffleGrouper(targets, random.Random(42))
    n = 70_000
    counts = Counter()
    for _ in range(n):
        chosen = g.choose(["v"])
        assert len(chosen) == 1
        counts[chosen[0]] += 1
    assert set(counts) == set(targets)
    expected = n / len(targets)
    for t in targets:
        assert abs(counts[t] - expected) <= 0.01 * expected, counts


def test_shuffle_each_round_visits_every_target_once_and_order_varies():
    targets = list(range(1, 9))
    g = ShuffleGrouper(targets, random.Random(7))
    rounds = []
    for _ in range(20):
        rnd = [g.choose([])[0] for _ in targets]
        assert sorted(rnd) == targets
        rounds.append(tuple(rnd))
    assert len(set(rounds)) > 1  # reshuffled, not a fixed cycle


def test_shuffle_default_rng_and_single_target():
    g = ShuffleGrouper([11])
    assert all(g.choose([i]) == [11] for i in range(10))


# ---------------------------------------------------------------- all / global / local-or-shuffle

def test_all_grouping_sends_to_every_target():
    g = AllGrouper([9, 3, 5])
    for v in range(5):
        assert sorted(g.choose([v])) == [3, 5, 9]


def test_global_grouping_sends_to_lowest_task():
    g = GlobalGrouper([12, 7, 30, 8])
    assert {tuple(g.choose([v])) for v in range(100)} == {(7,)}


def test_local_or_shuffle_prefers_local_tasks():
    targets = [1, 2, 3, 4, 5, 6]
    g = LocalOrShuffleGrouper(targets, {2, 5, 99}, random.Random(1))
    counts = Counter(g.choose([i])[0] for i in range(1000))
    assert set(counts) == {2, 5}
    assert counts[2] == counts[5] == 500


def test_local_or_shuffle_falls_back_to_all_targets():
    targets = [1, 2, 3, 4]
    for local in (set(), {10, 11}):
        g = LocalOrShuffleGrouper(targets, local, random.Random(3))
        counts = Counter(g.choose([i])[0] for i in range(400))
        assert counts == {1: 100, 2: 100, 3: 100, 4: 100}


# ---------------------------------------------------------------- locality-aware shuffle


def test_locality_aware_shuffle_stays_local_while_the_local_tasks_keep_up():
    load = {2: 0.5, 5: 0.5}
    g = LocalityAwareShuffleGrouper([1, 2, 3, 5], {2, 5, 99}, load.get, 0.8, 0.2, random.Random(1))
    counts = Counter(g.choose([i])[0] for i in range(1000))
    assert set(counts) == {2, 5} and counts[2] == counts[5] == 500


def test_locality_aware_shuffle_spreads_when_overloaded_and_returns_below_the_lower_bound():
    load = {2: 0.9, 5: 0.85}  # mean 0.875 > 0.8
    g = LocalityAwareShuffleGrouper([1, 2, 3, 5], {2, 5}, load.__getitem__, 0.8, 0.2, random.Random(2))
    first = [g.choose([i])[0] for i in range(63)]  # the first look at the load is at the 64th choice
    assert set(first) <= {2, 5}
    spread = Counter(g.choose([i])[0] for i in range(400))
    assert not g.scope_local and set(spread) == {1, 2, 3, 5}
    load.update({2: 0.5, 5: 0.5})  # between the bounds: stays spread (hysteresis)
    assert set(Counter(g.choose([i])[0] for i in range(400))) == {1, 2, 3, 5}
    load.update({2: 0.1, 5: 0.1})  # below the lower bound: local again
    for i in range(64):
        g.choose([i])
    assert g.scope_local
    assert set(Counter(g.choose([i])[0] for i in range(400))) == {2, 5}


def test_shuffle_is_locality_aware_only_when_some_but_not_all_targets_are_local():
    from executor.routing import Locality, _make_grouper
    from executor.structure import Grouping

    locality = Locality(lambda t: 0.0, 0.8, 0.2)
    for local, kind in (({1, 2}, LocalityAwareShuffleGrouper), (set(), ShuffleGrouper),
                        ({1, 2, 3, 4}, ShuffleGrouper)):
        g = _make_grouper(Grouping("shuffle"), [1, 2, 3, 4], Fields(["x"]), 9, local, None, "c", "s",
                          locality=locality)
        assert type(g) is kind, (local, g)
    assert type(_make_grouper(Grouping("shuffle"), [1, 2, 3, 4], Fields(["x"]), 9, {1}, None, "c", "s")) \
        is ShuffleGrouper  # topology.disable.loadaware.messaging: no Locality
    assert Locality.from_conf({"topology.disable.loadaware.messaging": True}, lambda t: 0.0) is None


# ---------------------------------------------------------------- fields

def test_fields_grouping_equal_values_go_to_same_task():
    fields = Fields(["word", "count"])
    g = FieldsGrouper([4, 5, 6, 7], fields, Fields(["word"]))
    seen: dict[str, int] = {}
    rng = random.Random(5)
    words = [f"w{i}" for i in range(200)]
    for _ in range(5000):
        w = rng.choice(words)
        (task,) = g.choose([w, rng.randint(0, 100)])
        assert seen.setdefault(w, task) == task
    # and it does spread distinct keys over the targets
    per_task = Counter(seen.values())
    assert set(per_task) == {4, 5, 6, 7}
    assert min(per_task.values()) >= 20


def test_fields_grouping_does_not_depend_on_target_order():
    fields = Fields(["k"])
    a = FieldsGrouper([1, 2, 3, 4, 5], fields, fields)
    b = FieldsGrouper([5, 3, 1, 4, 2], fields, fields)
    for k in range(300):
        assert a.choose([f"key{k}"]) == b.choose([f"key{k}"])


def test_fields_grouping_multiple_fields():
    stream = Fields(["a", "b", "c"])
    g = FieldsGrouper(list(range(1, 9)), stream, Fields(["a", "c"]))
    for a in range(30):
        for c in ("x", "y", "z"):
            chosen = {tuple(g.choose([a, b, c])) for b in range(10)}
            assert len(chosen) == 1  # field b is not part of the key
    # the key is the pair (a, c): with many distinct pairs, several tasks are used
    tasks = {g.choose([a, 0, c])[0] for a in range(30) for c in ("x", "y", "z")}
    assert len(tasks) >= 6
    # and the pair is hashed as a list of its values
    assert g.choose([3, 0, "x"]) == [sorted(range(1, 9))[mix32(hash_values([3, "x"])) % 8]]


def test_mix32_makes_every_output_bit_depend_on_every_input_bit():
    # Flipping input bit i flips output bit j for about half of the inputs, for every (i, j): the
    # property CRC-32 lacks (it is linear: a flipped input bit flips a fixed set of output bits).
    rng = random.Random(7)
    samples = [rng.getrandbits(32) for _ in range(400)]
    for i in range(32):
        flips = [0] * 32
        for h in samples:
            d = mix32(h) ^ mix32(h ^ (1 << i))
            for j in range(32):
                flips[j] += d >> j & 1
        assert all(0.3 < f / len(samples) < 0.7 for f in flips), (i, flips)
    assert sorted({mix32(h) for h in range(1 << 12)}) != list(range(1 << 12))  # not the identity
    assert len({mix32(h) for h in range(1 << 12)}) == 1 << 12                   # a bijection


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_fields_grouping_spreads_numbered_keys_evenly(n):
    # x-0..x-99: each task's share within a few percent of 1/n (100 keys hashed at random stray by
    # about 3 points; plain CRC-32 put 42 of them on one of 3 tasks).
    g = FieldsGrouper(list(range(n)), Fields(["k"]), Fields(["k"]))
    per_task = Counter(g.choose([f"x-{i}"])[0] for i in range(100))
    assert set(per_task) == set(range(n))
    assert all(abs(c / 100 - 1 / n) <= 0.06 for c in per_task.values()), sorted(per_task.values())


@pytest.mark.parametrize("prefix", ["part-", "sensor-", "user"])
def test_fields_grouping_spreads_a_few_numbered_keys(prefix):
    # The defect CRC-32 alone had: these four keys all went to one of 2 tasks and to 2 of 4.
    keys = [f"{prefix}{i}" for i in range(4)]
    for n, at_least in ((2, 2), (4, 3)):
        g = FieldsGrouper(list(range(n)), Fields(["k"]), Fields(["k"]))
        assert len({g.choose([k])[0] for k in keys}) >= at_least, (prefix, n)
    old = FieldsGrouper([0, 1], Fields(["k"]), Fields(["k"]), mixed=False)
    assert len({old.choose([k])[0] for k in keys}) == 1  # the hash kept for older state, as it was


def test_fields_grouping_mixes_every_kind_of_key():
    # ints, bytes and multi-field keys go through the same finaliser as strings
    stream = Fields(["k", "v"])
    for key_fields, values in ((["k"], lambda i: [i, 0]), (["k"], lambda i: [f"b{i}".encode(), 0]),
                               (["k", "v"], lambda i: ["x", i])):
        g = FieldsGrouper(list(range(4)), stream, Fields(key_fields))
        per_task = Counter(g.choose(values(i))[0] for i in range(400))
        assert set(per_task) == set(range(4)) and min(per_task.values()) >= 70, (key_fields, per_task)


def test_fields_grouping_accepts_plain_lists():
    g1 = FieldsGrouper([1, 2, 3], ["w", "n"], ["w"])
    g2 = FieldsGrouper([1, 2, 3], Fields(["w", "n"]), Fields(["w"]))
    for i in range(100):
        assert g1.choose([f"w{i}", i]) == g2.choose([f"w{i}", i])


# Code run in this process and in subprocesses with different PYTHONHASHSEEDs.
_CONSISTENCY_CODE = r'''
from executor.grouping import FieldsGrouper, PartialKeyGrouper, stable_hash
from executor.tuple import Fields

def keys():
    out = []
    for i in range(80):
        out.append(f"word-{i}-caf\u00e9-\u4e2d")
        out.append(f"b{i}".encode())
        out.append(i * 7919 - 300000 + (i << 40))
        out.append(i / 7.0 + 0.5)
        out.append((f"k{i}", i, b"raw", 2.25))
    return out

def compute():
    ks = keys()
    single = FieldsGrouper(list(range(1, 12)), Fields(["k", "v"]), Fields(["k"]))
    multi = FieldsGrouper(list(range(1, 12)), Fields(["k", "v"]), Fields(["k", "v"]))
    pk = PartialKeyGrouper(list(range(1, 12)), Fields(["k"]), Fields(["k"]))
    return {
        "hashes": [stable_hash(k) for k in ks],
        "single": [single.choose([k, "ignored"])[0] for k in ks],
        "multi": [multi.choose([k, i % 3])[0] for i, k in enumerate(ks)],
        "partial": [pk.choose([k])[0] for k in ks],
        "builtin": [hash(k) % 11 for k in ks if isinstance(k, (str, bytes))],
    }
'''


def _compute_in_subprocess(seed: str) -> dict:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = seed
    code = _CONSISTENCY_CODE + "\nimport json\nprint(json.dumps(compute()))\n"
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.cluster  # starts a process
def test_fields_grouping_is_identical_across_processes_with_different_hash_seeds():
    ns: dict = {}
    exec(_CONSISTENCY_CODE, ns)
    here = ns["compute"]()
    assert len(here["hashes"]) == 400
    p1 = _compute_in_subprocess("1")
    p2 = _compute_in_subprocess("987654")
    # sanity: Python's own hash() really differs between these processes, so the test is sensitive
    assert p1["builtin"] != p2["builtin"]
    for key in ("hashes", "single", "multi", "partial"):
        assert here[key] == p1[key] == p2[key], key


# ---------------------------------------------------------------- partial key

def _pkg_candidates(n_targets: int, key) -> set[int]:
    g = PartialKeyGrouper(list(range(1, n_targets + 1)), Fields(["k"]), Fields(["k"]))
    return {g.choose([key])[0] for _ in range(50)}


def test_partial_key_spreads_hot_key_over_two_tasks():
    targets = [10, 11, 12, 13, 14]
    spread = 0
    for k in range(40):
        key = f"hot-{k}"
        g = PartialKeyGrouper(targets, Fields(["k", "x"]), Fields(["k"]))
        counts = Counter(g.choose([key, i])[0] for i in range(1000))
        assert 1 <= len(counts) <= 2, counts  # never more than the two candidates
        if len(counts) == 2:
            spread += 1
            assert sorted(counts.values()) == [500, 500]  # load balanced between the two
    # two hash functions pick distinct candidates for most keys
    assert spread >= 25


def test_partial_key_candidates_are_stable_per_key():
    for k in range(30):
        first = _pkg_candidates(6, f"key{k}")
        assert first == _pkg_candidates(6, f"key{k}")


def test_partial_key_single_target():
    g = PartialKeyGrouper([42], Fields(["k"]), Fields(["k"]))
    assert {g.choose([i])[0] for i in range(20)} == {42}


# ---------------------------------------------------------------- split_tasks

def _sizes(ranges):
    return [hi - lo + 1 for lo, hi in ranges]


def test_split_tasks_5_over_3():
    ranges = split_tasks([1, 2, 3, 4, 5], 3)
    assert ranges == [(1, 2), (3, 4), (5, 5)]
    assert _sizes(ranges) == [2, 2, 1]


def test_split_tasks_executors_never_exceed_tasks():
    ranges = split_tasks([7, 8, 9], 5)
    assert ranges == [(7, 7), (8, 8), (9, 9)]


@pytest.mark.parametrize("n_tasks", range(1, 13))
@pytest.mark.parametrize("n_exec", range(1, 9))
def test_split_tasks_contiguous_even_and_complete(n_tasks, n_exec):
    ids = list(range(20, 20 + n_tasks))
    ranges = split_tasks(ids, n_exec)
    assert len(ranges) == min(n_tasks, n_exec)
    sizes = _sizes(ranges)
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # larger executors first, like Storm
    covered = [t for lo, hi in ranges for t in range(lo, hi + 1)]
    assert covered == ids  # contiguous, in order, no gaps or overlaps


def test_split_tasks_edge_cases():
    assert split_tasks([], 3) == []
    assert split_tasks([1, 2, 3], 1) == [(1, 3)]
    assert split_tasks([4], 0) == [(4, 4)]  # at least one executor


def test_topology_fields_grouping_hash_crc32_keeps_the_older_choice():
    from cluster_state.config import ConfigError, validate_config
    from executor.routing import _make_grouper
    from executor.structure import Grouping

    def grouper(mixed):
        return _make_grouper(Grouping("fields", Fields(["k"])), [0, 1], Fields(["k"]), 9, set(), None, "c", "s",
                             mixed_fields_hash=mixed)

    keys = [[f"part-{i}"] for i in range(4)]
    assert {grouper(False).choose(k)[0] for k in keys} == {1}  # plain CRC-32, as earlier storm-py chose
    assert {grouper(True).choose(k)[0] for k in keys} == {0, 1}
    validate_config({"topology.fields.grouping.hash": "crc32"}, "test")
    with pytest.raises(ConfigError, match="topology.fields.grouping.hash"):
        validate_config({"topology.fields.grouping.hash": "md5"}, "test")
