"""A pystorm bolt that passes values on, and misbehaves once, as `test.mode` says, on the value
"trigger" (a marker file in `test.dir` makes it once per test, across restarts).
Run as `python3 misbehave.py [json|msgpack]`."""

import os
import sys
import time

from pystorm import Bolt


class Misbehave(Bolt):
    auto_ack = False
    auto_anchor = False

    def initialize(self, conf, context):
        self.mode = conf["test.mode"]
        self.marker = os.path.join(conf["test.dir"], "misbehaved")

    def process(self, tup):
        value = tup.values[0]
        if value == "trigger" and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            self.misbehave(tup)
        self.emit([value], anchors=[tup])
        self.ack(tup)

    def misbehave(self, tup):
        mode = self.mode
        if mode == "exit":
            print("misbehave: exiting on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        if mode == "hang":
            print("misbehave: hanging on purpose", file=sys.stderr, flush=True)
            time.sleep(3600)
        if mode == "garbage":
            out = getattr(self.serializer.output_stream, "buffer", self.serializer.output_stream)
            out.write(b"this is not a message\nend\n" if self.serializer.__class__.__name__ == "JSONSerializer"
                      else b"\xc1\xc1\xc1")
            out.flush()
            time.sleep(3600)
        if mode == "unknown-ack":
            self.send_message({"command": "ack", "id": "no-such-id"})
        if mode == "anchor-after-ack":
            self.ack(tup)
            self.emit(["late"], anchors=[tup])
        if mode == "hold":  # stop reading until the test writes `release` (bounded)
            release = os.path.join(os.path.dirname(self.marker), "release")
            deadline = time.monotonic() + 60
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.05)
        if mode == "raise":
            raise ValueError("misbehave: raising on purpose")


if __name__ == "__main__":
    Misbehave(serializer=sys.argv[1] if len(sys.argv) > 1 else "json").run()
