"""The config schema: one rule per key of defaults.yaml (as Storm's ConfigValidation).

A rule says what a key accepts: its type, whether null is allowed, an inclusive or exclusive
minimum, a maximum, the allowed names, or an element rule for lists. `problem(rule, value)` is
a pure function returning None for an acceptable value or a description of what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

# Wait-strategy names accepted by executor/wait.py (lower-cased), shared with the schema so the
# two cannot disagree: short names and Storm's class names map to the two strategies.
WAIT_STRATEGY_NAMES: dict[str, str] = {
    "progressive": "progressive",
    "waitstrategyprogressive": "progressive",
    "org.apache.storm.policy.waitstrategyprogressive": "progressive",
    "park": "park",
    "waitstrategypark": "park",
    "org.apache.storm.policy.waitstrategypark": "park",
}

_TYPE_NAMES = {"int": "an int", "number": "a number", "bool": "true or false", "str": "a string",
               "list": "a list", "dict": "a mapping"}


@dataclass(frozen=True)
class Rule:
    type: str  # one of _TYPE_NAMES
    nullable: bool = False
    minimum: float | None = None
    exclusive_min: bool = False
    maximum: float | None = None
    choices: tuple[str, ...] | None = None  # compared case-insensitively
    nonempty: bool = False  # strings and lists
    item: "Rule | None" = None  # rule for every list element
    check: Callable[[Any], str | None] | None = None  # extra check, returns a problem or None
    describe_as: str | None = None  # replaces the generated description

    def describe(self) -> str:
        if self.describe_as:
            text = self.describe_as
        else:
            text = _TYPE_NAMES[self.type]
            if self.nonempty:
                text = "a non-empty " + text.split(" ", 1)[1]
            if self.minimum is not None and self.maximum is not None:
                text += f" from {_num(self.minimum)} to {_num(self.maximum)}"
            elif self.minimum is not None:
                text += f" {'>' if self.exclusive_min else '>='} {_num(self.minimum)}"
            elif self.maximum is not None:
                text += f" <= {_num(self.maximum)}"
            if self.choices:
                text += " (one of " + ", ".join(self.choices) + ")"
            if self.item is not None:
                text += f" (each entry {self.item.describe()})"
        return text + (" or null" if self.nullable else "")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _type_ok(rule: Rule, value: Any) -> bool:
    if rule.type == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False  # bool is an int subclass; True is never a count
    if rule.type == "int":
        return isinstance(value, int)
    if rule.type == "number":
        return isinstance(value, (int, float)) and math.isfinite(value)
    if rule.type == "str":
        return isinstance(value, str)
    if rule.type == "list":
        return isinstance(value, (list, tuple))
    return isinstance(value, dict)


def problem(rule: Rule, value: Any) -> str | None:
    """None if `value` satisfies `rule`, else what is allowed (and which element is wrong)."""
    if value is None:
        return None if rule.nullable else f"must be {rule.describe()} (null is not allowed)"
    if not _type_ok(rule, value):
        return f"must be {rule.describe()}"
    if rule.minimum is not None:
        low = value <= rule.minimum if rule.exclusive_min else value < rule.minimum
        if low:
            return f"must be {rule.describe()}"
    if rule.maximum is not None and value > rule.maximum:
        return f"must be {rule.describe()}"
    if rule.nonempty and not (value.strip() if isinstance(value, str) else value):
        return f"must be {rule.describe()}"
    if rule.choices and value.lower() not in {c.lower() for c in rule.choices}:
        return f"must be {rule.describe()}"
    if rule.item is not None:
        for i, element in enumerate(value):
            bad = problem(rule.item, element)
            if bad is not None:
                return f"entry {i} ({element!r}) {bad}"
    if rule.check is not None:
        return rule.check(value)
    return None


# ---------------------------------------------------------------- rule builders


def _int(minimum: int | None = None, maximum: int | None = None, nullable: bool = False) -> Rule:
    return Rule("int", nullable=nullable, minimum=minimum, maximum=maximum)


def _positive(nullable: bool = False) -> Rule:
    return Rule("number", nullable=nullable, minimum=0, exclusive_min=True)


def _non_negative() -> Rule:
    return Rule("number", minimum=0)


def _str(nullable: bool = False) -> Rule:
    return Rule("str", nullable=nullable, nonempty=True)


PORT = Rule("int", minimum=1, maximum=65535, describe_as="a port (an int from 1 to 65535)")
# A port to listen on; 0 picks a free one.
ANY_PORT = Rule("int", minimum=0, maximum=65535, describe_as="a port (an int from 0 to 65535; 0: a free one)")


def host_problem(entry: Any) -> str | None:
    """A host entry `host` or `host:port` ([v6]:port): None when well formed."""
    if not isinstance(entry, str) or not entry.strip():
        return "must be a non-empty host string"
    if any(c.isspace() for c in entry.strip()) or "," in entry:
        return "must be one host (no spaces or commas; list several hosts as list entries)"
    host, port = _split_port(entry.strip())
    if not host:
        return "has no host name"
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"has a bad port {port!r} (an int from 1 to 65535)"
    return None


def _split_port(entry: str) -> tuple[str, str | None]:
    if entry.startswith("["):  # [v6] or [v6]:port
        end = entry.find("]")
        if end < 0:
            return "", None
        rest = entry[end + 1:]
        return entry[1:end], (rest[1:] if rest.startswith(":") else None)
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, port
    return entry, None  # a bare v6 address or a host name


HOST = Rule("str", check=host_problem, describe_as="a host name (host or host:port)")
HOSTS = Rule("list", nonempty=True, item=HOST, describe_as="a non-empty list of host names")


def _wait_name() -> Rule:
    return Rule("str", check=_wait_name_problem,
                describe_as="a wait strategy: Progressive or Park (Storm's class names are accepted too)")


def _wait_name_problem(value: str) -> str | None:
    if value.lower() in WAIT_STRATEGY_NAMES:
        return None
    return "must be Progressive or Park (or Storm's WaitStrategyProgressive / WaitStrategyPark)"


def _absolute_path(value: str) -> str | None:
    return None if value.startswith("/") else "must be an absolute path (starting with '/')"


def spark_remote_problem(value: str) -> str | None:
    """A Spark Connect URL `sc://host[:port][/;param=value...]`: None when well formed."""
    if not value.startswith("sc://"):
        return "must be a Spark Connect URL starting with 'sc://' (e.g. sc://127.0.0.1:15002)"
    return host_problem(value[len("sc://"):].split("/", 1)[0])


def _gc_thresholds(value: list) -> str | None:
    return None if 1 <= len(value) <= 3 else "must list 1 to 3 thresholds (generation 0, 1, 2)"


def _unique(value: list) -> str | None:
    return None if len(set(value)) == len(value) else "must not list a port twice"


# The state providers (executor/state/provider.py) and the settings of the redis one
# (topology.state.provider.config): executor/state applies their defaults and checks a topology's
# config against these same rules at submit.
STATE_PROVIDERS = ("memory", "redis")
STATE_PROVIDER_CONFIG_RULES: dict[str, Rule] = {
    "host": _str(),
    "port": PORT,
    "db": _int(0),
    "password": _str(nullable=True),
    "key_prefix": _str(),
    "timeout": Rule("number", minimum=0, exclusive_min=True, describe_as="a number of seconds > 0"),
}


def state_provider_config_problem(value: dict) -> str | None:
    """None when every key of the mapping is known and acceptable; never shows a value (one of
    them may be a password)."""
    for key, item in value.items():
        rule = STATE_PROVIDER_CONFIG_RULES.get(key)
        if rule is None:
            return f"has an unknown key {key!r} (known: {', '.join(STATE_PROVIDER_CONFIG_RULES)})"
        bad = problem(rule, item)
        if bad is not None:
            return f"key {key!r} {bad}"
    return None


# ---------------------------------------------------------------- the schema

SCHEMA: dict[str, Rule] = {
    # ZooKeeper
    "storm.zookeeper.servers": HOSTS,
    "storm.zookeeper.port": PORT,
    "storm.zookeeper.root": Rule("str", nonempty=True, check=_absolute_path,
                                 describe_as="an absolute path such as /storm"),
    "storm.zookeeper.session.timeout": _int(1),
    "storm.zookeeper.connection.timeout": _int(1),
    "storm.zookeeper.retry.times": _int(0),
    "storm.zookeeper.retry.interval": _int(0),
    "storm.zookeeper.retry.intervalceiling.millis": _int(0),
    "storm.zookeeper.auth.scheme": _str(nullable=True),
    "storm.zookeeper.auth.payload": _str(nullable=True),
    "storm.zookeeper.topology.auth.scheme": _str(nullable=True),
    "storm.zookeeper.topology.auth.payload": _str(nullable=True),
    "storm.zookeeper.superACL": _str(nullable=True),
    "storm.messaging.curve.public": _str(nullable=True),
    "storm.messaging.curve.secret": _str(nullable=True),
    # local disk and identity
    "storm.local.dir": _str(),
    "storm.log.dir": _str(nullable=True),
    "storm.local.hostname": _str(nullable=True),
    "storm.package.max.bytes": _int(1),
    # Nimbus
    "nimbus.seeds": HOSTS,
    "nimbus.thrift.port": PORT,
    "nimbus.thrift.timeout": _positive(),
    "nimbus.authentication.secret": _str(nullable=True),
    "nimbus.monitor.freq.secs": _positive(),
    "nimbus.task.timeout.secs": _positive(),
    "nimbus.task.launch.secs": _positive(),
    "nimbus.supervisor.timeout.secs": _positive(),
    "nimbus.inbox.jar.expiration.secs": _positive(),
    "nimbus.code.sync.freq.secs": _positive(),
    # UI and logviewer
    "ui.host": _str(),
    "ui.port": ANY_PORT,
    "ui.title": _str(),
    "ui.pagination": _int(1),
    "ui.readonly.secret": _str(nullable=True),
    "ui.https.port": _int(0, 65535, nullable=True),
    "ui.https.keystore.path": _str(nullable=True),
    "ui.https.cert.path": _str(nullable=True),
    "ui.https.key.password": _str(nullable=True),
    "ui.disable.http.binding": Rule("bool"),
    "logviewer.port": ANY_PORT,
    "logviewer.host": _str(),
    "logviewer.https.port": _int(0, 65535, nullable=True),
    "logviewer.https.keystore.path": _str(nullable=True),
    "logviewer.https.cert.path": _str(nullable=True),
    "logviewer.https.key.password": _str(nullable=True),
    "logviewer.disable.http.binding": Rule("bool"),
    "logviewer.cleanup.interval.secs": _positive(),
    "logviewer.cleanup.age.mins": _positive(),
    "logviewer.max.sum.worker.logs.size.mb": _positive(),
    # Supervisor, workers, tasks
    "supervisor.slots.ports": Rule("list", item=PORT, check=_unique, describe_as="a list of ports (ints 1-65535)"),
    "supervisor.heartbeat.frequency.secs": _positive(),
    "supervisor.monitor.frequency.secs": _positive(),
    "supervisor.worker.start.timeout.secs": _positive(),
    "supervisor.worker.timeout.secs": _positive(),
    "supervisor.worker.memory.limit.mb": _positive(nullable=True),
    "supervisor.worker.memory.check.secs": _positive(),
    "topology.worker.memory.limit.mb": _positive(nullable=True),
    "supervisor.worker.shutdown.sleep.secs": _non_negative(),
    "worker.heartbeat.frequency.secs": _positive(),
    "task.heartbeat.frequency.secs": _positive(),
    "task.refresh.poll.secs": _positive(),
    # topology
    "topology.workers": _int(1),
    "topology.acker.executors": _int(0, nullable=True),
    "topology.message.timeout.secs": _positive(),
    "topology.enable.message.timeouts": Rule("bool"),
    "topology.max.spout.pending": _int(1, nullable=True),
    "topology.spout.pending.latency.ms": _positive(nullable=True),
    "topology.bolts.window.length.count": _int(1, nullable=True),
    "topology.bolts.window.length.duration.ms": _positive(nullable=True),
    "topology.bolts.sliding.interval.count": _int(1, nullable=True),
    "topology.bolts.sliding.interval.duration.ms": _positive(nullable=True),
    "topology.bolts.tuple.timestamp.field.name": _str(nullable=True),
    "topology.bolts.tuple.timestamp.max.lag.ms": Rule("number", nullable=True, minimum=0),
    "topology.bolts.watermark.event.interval.ms": _positive(nullable=True),
    "topology.bolts.late.tuple.stream": _str(nullable=True),
    "topology.bolts.window.max.events.in.memory": _int(1, nullable=True),
    "topology.tick.tuple.freq.secs": _positive(nullable=True),
    "topology.max.task.parallelism": _int(1, nullable=True),
    "topology.multilang.serializer": Rule("str", choices=("json", "msgpack")),
    "topology.subprocess.timeout.secs": _positive(nullable=True),
    "topology.shellbolt.max.pending": _int(1),
    "topology.debug": Rule("bool"),
    "topology.eventlogger.executors": Rule("int", minimum=0, maximum=0,
                                           describe_as="0 (storm-py has no event logger)"),
    "topology.spout.recvq.skips": _int(1),
    "topology.executor.receive.buffer.size": _int(1),
    "topology.executor.receive.buffer.target.ms": _positive(nullable=True),
    "topology.producer.batch.size": _int(1),
    "topology.disable.loadaware.messaging": Rule("bool"),
    "topology.localityaware.higher.bound": Rule("number", minimum=0, maximum=1),
    "topology.localityaware.lower.bound": Rule("number", minimum=0, maximum=1),
    "topology.fields.grouping.hash": Rule("str", choices=("mixed", "crc32")),
    "topology.executor.thread.mode": Rule("str", choices=("shared", "dedicated")),
    "topology.executor.blocking.step.millis": _positive(nullable=True),
    "topology.transfer.buffer.size": _int(1),
    "topology.worker.receive.overflow.size": _int(1),
    "topology.transfer.hwm": _int(1),
    "topology.transfer.socket.bytes": _int(4096, nullable=True),
    "topology.worker.gc.thresholds": Rule("list", nullable=True, item=_int(0), check=_gc_thresholds,
                                          describe_as="a list of 1 to 3 ints >= 0 (Python's gc.set_threshold)"),
    "topology.executor.receive.buffer.bytes": _int(1),
    "topology.max.tuple.size.bytes": _int(1),
    "topology.stats.sample.rate": Rule("number", minimum=0, maximum=1),
    "topology.max.error.report.per.interval": _int(1),
    "topology.error.throttle.interval.secs": _positive(),
    # state and checkpoints
    "topology.state.provider": Rule("str", choices=STATE_PROVIDERS),
    "topology.state.provider.config": Rule("dict", check=state_provider_config_problem,
                                           describe_as="a mapping of host, port, db, password, key_prefix, timeout"),
    "topology.state.checkpoint.interval.ms": _int(1),
    "topology.state.exactly.once": Rule("bool"),
    "topology.state.checkpoint.pause.after.ms": _int(0, nullable=True),
    "topology.state.savepoint": _str(nullable=True),
    "topology.state.savepoint.dir": _str(nullable=True),
    "topology.state.savepoint.from": Rule("dict", nullable=True, describe_as="a mapping of generation, txid"),
    # Spark sink
    "spark.master": _str(),
    "spark.remote": Rule("str", nullable=True, check=spark_remote_problem,
                         describe_as="a Spark Connect URL (sc://HOST:PORT)"),
    "sink.compaction.enabled": Rule("bool"),
    "sink.compaction.min.batches": _int(2),
    "sink.compaction.target.mb": Rule("number", minimum=0, exclusive_min=True),
    "sink.compaction.max.batches": _int(2),
    "sink.retention.secs": Rule("number", minimum=0),
}

for _situation in ("spout", "bolt", "backpressure"):
    _prefix = f"topology.{_situation}.wait"
    SCHEMA[f"{_prefix}.strategy"] = _wait_name()
    SCHEMA[f"{_prefix}.progressive.level1.count"] = _int(0)
    SCHEMA[f"{_prefix}.progressive.level2.count"] = _int(0)
    SCHEMA[f"{_prefix}.progressive.level3.sleep.millis"] = _non_negative()
    SCHEMA[f"{_prefix}.park.microsec"] = _non_negative()
