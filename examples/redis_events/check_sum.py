"""Check the events table: one row per event, and the exact sum.

usage: python3 examples/redis_events/check_sum.py PATH --events N [--first 1] [--spark-remote sc://HOST:PORT]
Prints rows (the raw table, as committed), events (distinct entry ids), sum and expected sum;
exits 0 when the raw table holds exactly n = first..first+N-1, each once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from executor.sinks.spark import read_table, reader_session  # noqa: E402


def check(path: str, events: int, first: int = 1, spark=None) -> dict:
    from pyspark.sql import functions as F

    raw = read_table(path, dedupe=False, spark=spark)
    row = raw.agg(F.count("*").alias("rows"), F.countDistinct("id").alias("events"),
                  F.countDistinct("n").alias("distinct"), F.sum("n").alias("sum"), F.min("n").alias("min"),
                  F.max("n").alias("max")).collect()[0]
    last = first + events - 1
    result = {"rows": row["rows"], "events": row["events"], "distinct": row["distinct"], "sum": row["sum"] or 0,
              "expected_sum": (first + last) * events // 2, "min": row["min"], "max": row["max"]}
    result["exact"] = (result["rows"] == result["events"] == result["distinct"] == events
                       and result["sum"] == result["expected_sum"] and result["min"] == first and result["max"] == last)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--spark-remote", metavar="sc://HOST:PORT",
                    help="read through this Spark Connect server instead of a Spark of its own")
    args = ap.parse_args()
    print(f"connecting to {args.spark_remote} to read the table ..." if args.spark_remote
          else "starting Spark to read the table ...", file=sys.stderr, flush=True)
    spark = reader_session({"spark.remote": args.spark_remote} if args.spark_remote else None)
    try:
        result = check(args.path, args.events, args.first, spark)
    finally:
        spark.stop()
    print(json.dumps(result))
    return 0 if result["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
