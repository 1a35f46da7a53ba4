"""The supervisor's look for a Nimbus under its ZooKeeper root (pure)."""

from __future__ import annotations

import logging

from cluster_state.records import NimbusRegistration
from cluster_state.settings import zk_settings
from daemons.supervisor.nimbus_presence import nimbus_presence_message

ZK = zk_settings({"storm.zookeeper.servers": ["127.0.0.1"], "storm.zookeeper.port": 2181,
                  "storm.zookeeper.root": "/elsewhere"})
NIMBUS = {"127.0.0.1:6627": NimbusRegistration("127.0.0.1", 6627, 1700000000)}


def test_none_registered_is_said_once_naming_zookeeper_and_the_root():
    level, text = nimbus_presence_message({}, ZK, None)
    assert level == logging.WARNING
    assert text.startswith("no Nimbus is registered under ZooKeeper 127.0.0.1:2181 root '/elsewhere'")
    assert "storm.zookeeper.root" in text
    assert nimbus_presence_message({}, ZK, False) is None  # already said


def test_a_nimbus_seen_later_is_said_and_one_seen_at_once_is_not():
    level, text = nimbus_presence_message(NIMBUS, ZK, False)
    assert level == logging.INFO and text == ("Nimbus 127.0.0.1:6627 is now registered under ZooKeeper "
                                              "127.0.0.1:2181 root '/elsewhere'")
    assert nimbus_presence_message(NIMBUS, ZK, None) is None
