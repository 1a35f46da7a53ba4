"""The ClusterState contract, run against the in-memory store and a real ZooKeeper."""

from __future__ import annotations

import threading

import pytest
from cs_helpers import Recorder, flush_events, make_backend
from zk_fixture import wait_until

from cluster_state import ClusterState, ClusterStateUnavailableError, ConnectionState, EventType, NoNodeError

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]


@pytest.fixture(params=["memory", "zookeeper"])
def new_client(request):
    factory, close_all = make_backend(request, request.param)
    yield factory
    close_all()


def test_implements_protocol(new_client):
    client = new_client()
    assert isinstance(client, ClusterState)
    assert client.connection_state == ConnectionState.CONNECTED
    assert client.disconnected_for() == 0.0


def test_set_get_exists_version(new_client):
    cs = new_client()
    assert cs.get_data("/a/b/c") is None
    assert not cs.exists("/a/b/c")
    assert cs.get_version("/a/b/c") is None
    cs.set_data("/a/b/c", b"one")  # creates parents
    assert cs.exists("/a/b")
    assert cs.get_data("/a/b/c") == b"one"
    assert cs.get_data_with_version("/a/b/c") == (b"one", 0)
    cs.set_data("/a/b/c", b"two")
    assert cs.get_data_with_version("/a/b/c") == (b"two", 1)
    assert cs.get_version("/a/b/c") == 1
    assert cs.get_data("/a/b") == b""


def test_children_sorted_and_missing_node(new_client):
    cs = new_client()
    for name in ("z", "a", "m"):
        cs.set_data(f"/kids/{name}", b"")
    assert cs.get_children("/kids") == ["a", "m", "z"]
    with pytest.raises(NoNodeError):
        cs.get_children("/nothing-here")


def test_delete_is_recursive_and_tolerates_missing(new_client):
    cs = new_client()
    cs.set_data("/d/x/y", b"1")
    cs.set_data("/d/z", b"2")
    cs.delete_node("/d")
    assert not cs.exists("/d")
    cs.delete_node("/d")  # no error


def test_mkdirs_is_idempotent(new_client):
    cs = new_client()
    cs.mkdirs("/m/n/o")
    cs.mkdirs("/m/n/o")
    assert cs.get_children("/m/n") == ["o"]


def test_sequential_nodes_are_numbered_in_order(new_client):
    cs = new_client()
    paths = [cs.create_sequential("/seq/e", str(i).encode()) for i in range(3)]
    assert paths == sorted(paths)
    assert all(p.startswith("/seq/e") and len(p) == len("/seq/e") + 10 for p in paths)
    assert [cs.get_data(p) for p in paths] == [b"0", b"1", b"2"]
    assert cs.get_children("/seq") == [p.rsplit("/", 1)[1] for p in paths]


def test_data_watch_is_one_shot_and_rearmed_by_reading(new_client):
    watcher, writer = new_client(), new_client()
    rec = Recorder()
    watcher.register(rec)
    writer.set_data("/w", b"0")
    assert watcher.get_data("/w", watch=True) == b"0"
    writer.set_data("/w", b"1")
    rec.wait_for(EventType.CHANGED, "/w")
    writer.set_data("/w", b"2")  # no watch armed: no event
    flush_events(watcher, writer)
    assert rec.for_path("/w") == [EventType.CHANGED]
    assert watcher.get_data("/w", watch=True) == b"2"  # re-register by reading again
    writer.delete_node("/w")
    rec.wait_for(EventType.DELETED, "/w")
    assert rec.for_path("/w") == [EventType.CHANGED, EventType.DELETED]


def test_watch_on_missing_node_fires_on_creation(new_client):
    watcher, writer = new_client(), new_client()
    rec = Recorder()
    watcher.register(rec)
    assert watcher.get_data("/later", watch=True) is None
    assert not watcher.exists("/later2", watch=True)
    writer.set_data("/later", b"x")
    writer.set_data("/later2", b"y")
    rec.wait_for(EventType.CREATED, "/later")
    rec.wait_for(EventType.CREATED, "/later2")


def test_repeated_watched_reads_fire_once(new_client):
    watcher, writer = new_client(), new_client()
    rec = Recorder()
    watcher.register(rec)
    writer.set_data("/r", b"0")
    for _ in range(3):
        watcher.get_data("/r", watch=True)
        watcher.get_version("/r", watch=True)
    writer.set_data("/r", b"1")
    flush_events(watcher, writer)
    assert rec.for_path("/r") == [EventType.CHANGED]


def test_child_watch_fires_on_create_and_delete_then_node_delete(new_client):
    watcher, writer = new_client(), new_client()
    rec = Recorder()
    watcher.register(rec)
    writer.mkdirs("/p")
    assert watcher.get_children("/p", watch=True) == []
    writer.set_data("/p/c1", b"")
    rec.wait_for(EventType.CHILD, "/p")
    writer.set_data("/p/c1", b"data change is not a child event")
    writer.set_data("/p/c2", b"")  # watch consumed: no event
    flush_events(watcher, writer)
    assert rec.for_path("/p") == [EventType.CHILD]
    assert watcher.get_children("/p", watch=True) == ["c1", "c2"]
    writer.delete_node("/p/c1")
    rec.wait_for(EventType.CHILD, "/p", count=2)
    assert watcher.get_children("/p", watch=True) == ["c2"]
    watcher.get_data("/p", watch=True)
    writer.delete_node("/p")
    rec.wait_for(EventType.CHILD, "/p", count=3)  # c2 went first
    flush_events(watcher, writer)
    # The node itself went: one DELETED although both a data and a child watch were armed.
    assert rec.for_path("/p").count(EventType.DELETED) <= 1


def test_only_the_watching_client_is_notified(new_client):
    a, b = new_client(), new_client()
    rec_a, rec_b = Recorder(), Recorder()
    a.register(rec_a)
    b.register(rec_b)
    a.set_data("/only", b"0")
    a.get_data("/only", watch=True)
    b.set_data("/only", b"1")
    rec_a.wait_for(EventType.CHANGED, "/only")
    flush_events(b, a)
    assert rec_b.for_path("/only") == []


def test_callbacks_run_on_the_clients_event_thread(new_client):
    watcher, writer = new_client(), new_client()
    rec = Recorder()
    watcher.register(rec)
    watcher.get_data("/t", watch=True)
    writer.set_data("/t", b"")
    rec.wait_for(EventType.CREATED, "/t")
    assert rec.threads[0] != threading.current_thread().name
    assert "events" in rec.threads[0] or "cluster-state" in rec.threads[0]


def test_unregister_and_failing_callbacks(new_client):
    watcher, writer = new_client(), new_client()
    good, removed = Recorder(), Recorder()

    def broken(event_type, path):
        raise RuntimeError("callback bug")

    watcher.register(broken)
    removed_id = watcher.register(removed)
    watcher.register(good)
    watcher.unregister(removed_id)
    watcher.unregister("no-such-id")
    watcher.get_data("/u", watch=True)
    writer.set_data("/u", b"")
    good.wait_for(EventType.CREATED, "/u")  # delivered despite the broken callback before it
    assert removed.events == []


def test_ephemeral_sequential_nodes_belong_to_their_session_and_go_with_it(new_client):
    owner, other = new_client(), new_client()
    first = owner.create_ephemeral_sequential("/latch/n-", b"owner")
    second = other.create_ephemeral_sequential("/latch/n-", b"other")
    assert first < second and first.startswith("/latch/n-") and len(first) == len("/latch/n-") + 10
    assert owner.owns_ephemeral(first) and not owner.owns_ephemeral(second)
    assert other.owns_ephemeral(second) and not other.owns_ephemeral(first)
    owner.set_data("/latch/persistent", b"x")
    assert not owner.owns_ephemeral("/latch/persistent") and not owner.owns_ephemeral("/latch/missing")
    owner.close()
    wait_until(lambda: other.get_children("/latch") == ["n-" + second[-10:], "persistent"], 10,
               "the closed client's sequential node to go")


def test_delete_if_version_deletes_only_the_version_read(new_client):
    cs = new_client()
    cs.set_data("/cas/node", b"v1")
    _, version = cs.get_data_with_version("/cas/node")
    cs.set_data("/cas/node", b"v2")  # changed meanwhile
    assert cs.delete_if_version("/cas/node", version) is False and cs.get_data("/cas/node") == b"v2"
    _, version = cs.get_data_with_version("/cas/node")
    assert cs.delete_if_version("/cas/node", version) is True and not cs.exists("/cas/node")
    assert cs.delete_if_version("/cas/node", version) is False  # gone


def test_ephemeral_node_vanishes_when_owner_closes(new_client):
    owner, other = new_client(), new_client()
    rec = Recorder()
    other.register(rec)
    owner.set_ephemeral_node("/eph/node", b"v1")
    owner.set_ephemeral_node("/eph/node", b"v2")  # overwrite, still owned
    assert other.get_data("/eph/node", watch=True) == b"v2"
    owner.close()
    rec.wait_for(EventType.DELETED, "/eph/node")
    assert not other.exists("/eph/node")
    assert other.exists("/eph")  # the parent is persistent


def test_ephemeral_node_taken_over_by_a_new_owner(new_client):
    first, second = new_client(), new_client()
    first.set_ephemeral_node("/eph/shared", b"first")
    second.set_ephemeral_node("/eph/shared", b"second")
    first.close()  # the node is the second client's now: it must survive
    assert second.get_data("/eph/shared") == b"second"
    second.close()
    observer = new_client()
    wait_until(lambda: not observer.exists("/eph/shared"), 10, "the ephemeral node to go")


def test_close_is_idempotent_and_final(new_client):
    cs = new_client()
    cs.close()
    cs.close()
    assert cs.connection_state == ConnectionState.CLOSED
    with pytest.raises(ClusterStateUnavailableError):
        cs.get_data("/x")


def test_callback_may_close_its_own_client(new_client):
    watcher, writer = new_client(), new_client()
    closed = threading.Event()

    def close_me(event_type, path):
        watcher.close()
        closed.set()

    watcher.register(close_me)
    watcher.get_data("/c", watch=True)
    writer.set_data("/c", b"")
    wait_until(closed.is_set, 10, "the callback to close its client")
    assert watcher.connection_state == ConnectionState.CLOSED


def test_closed_client_gets_no_more_events(new_client):
    watcher, writer = new_client(), new_client()
    rec = Recorder()
    watcher.register(rec)
    writer.mkdirs("/gone")
    watcher.get_data("/gone", watch=True)
    watcher.get_children("/gone", watch=True)
    watcher.close()
    writer.set_data("/gone/child", b"")
    writer.delete_node("/gone")
    observer = new_client()
    flush_events(observer, writer)
    assert rec.events == []


def test_oversized_write_is_refused_before_sending(new_client):
    from cluster_state.errors import NodeTooLargeError
    from cluster_state.protocol import MAX_REQUEST_BYTES

    cs = new_client()
    for write in (lambda d: cs.set_data("/big", d), lambda d: cs.create_sequential("/big-", d),
                  lambda d: cs.set_ephemeral_node("/big", d)):
        with pytest.raises(NodeTooLargeError, match=f"{MAX_REQUEST_BYTES + 1} bytes to /big"):
            write(b"x" * (MAX_REQUEST_BYTES + 1))
    assert not cs.exists("/big") and cs.connection_state == ConnectionState.CONNECTED
