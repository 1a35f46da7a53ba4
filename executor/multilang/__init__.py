"""Storm's multilang protocol: components written in any language (pystorm, streamparse) run as
subprocesses talking to their executor over stdin/stdout (docs/multilang.md).

- `protocol`: framing (JSON with Storm's `end` lines, msgpack) and the messages, pure.
- `process`: one subprocess: launch, handshake, a reader thread, its stderr tail.
- `bolt`, `spout`: ShellBolt and ShellSpout (Storm's ShellBolt.java and ShellSpout.java).
"""
