"""The sources in the checkpoint (design section 19): RedisStreamSpout and DirectorySpout, with
the same arguments, run exactly once when the topology's config says so. A number failed on
purpose rolls the whole topology back; the spout rewinds to its committed read position, and the
committed sum holds every number once. Their entries are XACKed, and their files moved to
`done/`, only after the commit that covers them: one taken before would be missing from the
rewound read, and from the sum."""

import os

import pytest
from test_state import committed_totals, rollbacks_per_task

pytestmark = pytest.mark.timeout(150)

N = 1500


def _summed_once_across_a_rollback(run) -> None:
    r = run.results
    want = (N * (N + 1) // 2, N)
    run.wait(lambda: committed_totals(r) == want,
             lambda: f"the committed sum and count {committed_totals(r)} to be {want}")
    assert [x["values"] for x in r.records("relay", "failed")] == [[N // 2]]
    # the start's rollback, then the one the failed number asked for
    assert all(k >= 2 for k in rollbacks_per_task(r).values()), rollbacks_per_task(r)


def add_numbers(client, n: int) -> None:
    """Entries {"n": "1"} .. {"n": str(n)} added to the stream `numbers` (exactly_once_redis.py's)."""
    pipe = client.pipeline(transaction=False)
    for i in range(1, n + 1):
        pipe.xadd("numbers", {"n": str(i)})
    pipe.execute()


def _group(client) -> dict:
    groups = [g for g in client.xinfo_groups("numbers") if g["name"] == b"summer"]
    return groups[0] if groups else {"entries-read": 0, "pending": -1}


@pytest.mark.redis
def test_a_redis_stream_is_summed_exactly_once_across_a_rollback(redis_server, cluster):
    # the server first: it outlives the topology, whose spout would report it gone
    client = redis_server.client()
    try:
        add_numbers(client, N)
        run = cluster.submit("exactly_once_redis.py", "eoredis",
                             {"scenario.redis.port": redis_server.port, "numbers.fail.once": N // 2,
                              **redis_server.conf()})
        _summed_once_across_a_rollback(run)
        # every entry XACKed once a commit covered it: none left pending
        run.wait(lambda: (g := _group(client))["entries-read"] == N and g["pending"] == 0,
                 lambda: f"every entry read and XACKed: {_group(client)}")
    finally:
        client.close()


def _write(directory, name: str, numbers: range) -> None:
    tmp = directory / f".{name}"
    tmp.write_text("".join(f"{n}\n" for n in numbers))
    os.rename(tmp, directory / name)  # complete when it appears, as the spout asks


def test_a_directory_is_summed_exactly_once_across_a_rollback(cluster, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    third = N // 3
    for i in range(3):
        _write(source, f"part-{i}.txt", range(1 + i * third, 1 + (i + 1) * third))
    run = cluster.submit("exactly_once_directory.py", "eodir",
                         {"scenario.source.dir": str(source), "numbers.fail.once": N // 2})
    _summed_once_across_a_rollback(run)
    done = source / "done"
    run.wait(lambda: done.is_dir() and sorted(os.listdir(done)) == [f"part-{i}.txt" for i in range(3)],
             lambda: f"every file moved to done/ once committed: {sorted(os.listdir(source))}")
