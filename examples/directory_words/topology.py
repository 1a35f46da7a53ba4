"""Word counts over text files dropped into a directory (DirectorySpout).

    mkdir -p /tmp/storm-py-inbox
    printf 'the cow jumped\nover the moon\n' > /tmp/words.txt && mv /tmp/words.txt /tmp/storm-py-inbox/
    storm-py local examples/directory_words/topology.py --duration 10

Each file's lines are counted; once all of a file's lines are acked, `words.txt.done` appears
beside it and the file is never read again (run it twice: the second run reads nothing old)."""

import logging
from collections import Counter

from executor.api import Bolt, DirectorySpout, TopologyBuilder

log = logging.getLogger("directory_words")


class CountWords(Bolt):
    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 2}

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts = Counter()

    def execute(self, tup):
        if tup.is_tick():
            if self.counts:
                log.warning("top words: %s", self.counts.most_common(5))
            return
        self.counts.update(tup.values[0].split())
        self.collector.ack(tup)  # the acks are what let the spout mark a file done


INBOX = "/tmp/storm-py-inbox"  # files must be complete when they appear: write elsewhere, then mv

builder = TopologyBuilder()
builder.set_spout("lines", DirectorySpout(INBOX, done="marker"), 2)
builder.set_bolt("count", CountWords()).shuffle_grouping("lines")
topology = builder.create_topology()
config = {"topology.max.spout.pending": 500}
