"""pystorm components for the multilang tests, written as pystorm's users write them.
Run as `python3 words.py CLASS [json|msgpack]`."""

import sys
from collections import Counter

from pystorm import Bolt, Spout

SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
             "four score and seven years ago", "snow white and the seven dwarfs"]


class SentenceSpout(Spout):
    """Reliable: every sentence has an id (a number), re-emitted when it fails."""

    def initialize(self, conf, context):
        self.limit = int(conf.get("test.sentences", 200))
        self.n = 0
        self.pending = {}
        self.acked = 0

    def next_tuple(self):
        if self.n >= self.limit:
            return
        self.n += 1
        sentence = SENTENCES[self.n % len(SENTENCES)]
        self.pending[self.n] = sentence
        self.emit([sentence], tup_id=self.n)

    def ack(self, tup_id):
        self.pending.pop(tup_id)
        self.acked += 1
        if self.acked % 50 == 0:
            self.logger.info("acked %d sentences", self.acked)

    def fail(self, tup_id):
        self.logger.info("replaying %s", tup_id)
        self.emit([self.pending[tup_id]], tup_id=tup_id)


class SplitBolt(Bolt):
    """Auto-anchor and auto-ack (pystorm's defaults)."""

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class CountBolt(Bolt):
    def initialize(self, conf, context):
        self.counts = Counter()

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] += 1
        self.emit([word, self.counts[word]])


if __name__ == "__main__":
    serializer = sys.argv[2] if len(sys.argv) > 2 else "json"
    globals()[sys.argv[1]](serializer=serializer).run()
