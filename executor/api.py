"""The topology-author API (docs/topology-guide.md, "The API: `executor.api`"). These names are fixed."""

from executor.checkpoint.api import (
    BaseStatefulBolt,
    BaseStatefulSpout,
    BaseStatefulWindowedBolt,
    RewindableSpout,
)
from executor.components import BasicBolt, Bolt, OutputFieldsDeclarer, Spout
from executor.context import TopologyContext
from executor.errors import (
    AlreadyAliveError,
    EmitError,
    FailedException,
    InvalidTopologyError,
    NotAliveError,
)
from executor.multilang.bolt import ShellBolt
from executor.multilang.spout import ShellSpout
from executor.spouts.directory import DirectorySpout
from executor.spouts.redis_stream import RedisStreamSpout
from executor.state import KeyValueState
from executor.topology import BoltDeclarer, SpoutDeclarer, StormTopology, TopologyBuilder
from executor.tuple import Fields, Tuple
from executor.windowing.bolt import BaseWindowedBolt
from executor.windowing.spec import Count, Duration
from executor.windowing.window import TupleWindow

__all__ = [
    "Spout", "Bolt", "BasicBolt", "TopologyBuilder", "Fields", "FailedException", "InvalidTopologyError",
    "AlreadyAliveError", "NotAliveError", "EmitError", "Tuple", "TopologyContext", "OutputFieldsDeclarer",
    "StormTopology", "SpoutDeclarer", "BoltDeclarer", "ShellBolt", "ShellSpout",
    "BaseStatefulBolt", "BaseStatefulSpout", "RewindableSpout", "KeyValueState", "BaseWindowedBolt", "TupleWindow", "Count",
    "Duration", "BaseStatefulWindowedBolt", "RedisStreamSpout", "DirectorySpout",
]
