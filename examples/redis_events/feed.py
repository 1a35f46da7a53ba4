"""Append numbered events (n = 1..N) to a Redis stream, as a producer would.

usage: python3 examples/redis_events/feed.py --port PORT [--host H] [--stream events] --events N
"""

from __future__ import annotations

import argparse
import sys

CHUNK = 5000


def feed(client, stream: str, first: int, last: int) -> None:
    for start in range(first, last + 1, CHUNK):
        pipe = client.pipeline(transaction=False)
        for n in range(start, min(last, start + CHUNK - 1) + 1):
            pipe.xadd(stream, {"n": str(n)})
        pipe.execute()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--stream", default="events")
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--first", type=int, default=1, help="the first number (default 1)")
    args = ap.parse_args()
    import redis

    client = redis.Redis(host=args.host, port=args.port, socket_timeout=10, socket_connect_timeout=5)
    try:
        feed(client, args.stream, args.first, args.first + args.events - 1)
    except (redis.RedisError, OSError) as exc:
        print(f"error: Redis at {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    last = args.first + args.events - 1
    print(f"appended n={args.first}..{last} to stream {args.stream!r}; their sum is "
          f"{(args.first + last) * args.events // 2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
