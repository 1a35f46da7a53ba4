"""The connection a Redis stream spout's fetcher thread reads and acks on (its hot round trip).

Why not redis-py's pipeline for these: the fetcher thread shares the GIL with the worker's
executor thread, every system call releases the GIL, and taking it back while the executor
thread runs costs a forced switch (after `sys.setswitchinterval`) that stalls the executor
thread. A pipeline's execute made about seven such calls per round trip (the pool's check for
unread data, a poll before each send and each receive, which is how Python's socket timeouts
work) plus the pool's Python bookkeeping. Here a round trip is one send and as few receives as
the reply needs: the socket blocks, with its timeout set on the socket itself
(SO_SNDTIMEO/SO_RCVTIMEO), so a Redis that stops answering still ends the call. Replies are
parsed by hiredis as redis-py's own parser does (text, "surrogateescape"). The fetcher's other
commands (creating groups, claims, dead letters: rare) stay on redis-py's client.
"""

from __future__ import annotations

import socket
import struct

from executor.state.redis_client import RedisSettings

READ_SIZE = 1 << 18  # bytes per receive: a read of 500 entries of ~100 bytes in one call


class StreamWire:
    """One connection, used by one thread (the fetcher's). Failures are redis-py's exception
    types (ConnectionError, TimeoutError, ResponseError), so the fetcher treats them as it
    treats its client's; the connection is closed on any but a ResponseError."""

    def __init__(self, settings: RedisSettings):
        self.settings = settings
        self._sock: socket.socket | None = None
        self._reader = None
        self._buf = bytearray(READ_SIZE)

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def open(self) -> None:
        import hiredis
        import redis.exceptions as rex

        s = self.settings
        try:
            sock = socket.create_connection((s.host, s.port), timeout=s.timeout)
        except OSError as exc:  # worded as redis-py words it (redis_client.problem_of reads it)
            raise rex.ConnectionError(f"Error {exc.errno} connecting to {s.host}:{s.port}. "
                                      f"{exc.strerror or exc}.") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking: no poll before each call
        secs = max(0.001, s.timeout)
        timeval = struct.pack("ll", int(secs), int((secs % 1) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        self._sock = sock
        self._reader = hiredis.Reader(replyError=rex.ResponseError, encoding="utf-8", errors="surrogateescape")
        # as redis-py's client: AUTH only with a password set (an empty one is none), SELECT for db > 0
        hello = ([("AUTH", s.password)] if s.password else []) + ([("SELECT", s.db)] if s.db else [])
        if hello:
            try:
                self.call(hello)
            except rex.ResponseError:
                self.close()
                raise

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._reader = None

    def call(self, commands: list[tuple]) -> list:
        """Send `commands` at once and return their replies; the first error reply is raised
        once every reply is read (the connection stays usable), as redis-py's pipeline does."""
        import hiredis
        import redis.exceptions as rex

        sock, reader, buf = self._sock, self._reader, self._buf
        if sock is None:
            raise rex.ConnectionError("Connection closed (not open).")
        replies: list = []
        try:
            sock.sendall(b"".join([hiredis.pack_command(c) for c in commands]))
            while len(replies) < len(commands):
                reply = reader.gets()
                if reply is False:  # hiredis: not a whole reply yet
                    n = sock.recv_into(buf)
                    if not n:
                        raise ConnectionResetError("Connection closed by server")
                    reader.feed(buf, 0, n)
                else:
                    replies.append(reply)
        except (BlockingIOError, socket.timeout) as exc:  # SO_RCVTIMEO/SO_SNDTIMEO passed
            self.close()
            raise rex.TimeoutError(f"Timeout talking to the server (no answer within "
                                   f"{self.settings.timeout:g}s)") from exc
        except (OSError, hiredis.ProtocolError) as exc:
            self.close()
            raise rex.ConnectionError(f"Error while talking to the server: {exc}") from exc
        for reply in replies:
            if isinstance(reply, rex.ResponseError):
                raise reply
        return replies
