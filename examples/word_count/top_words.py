"""Print the most frequent words stored by the word_count example, read back from its table.

usage: python3 examples/word_count/top_words.py [PATH] [-n 10] [--spark-remote sc://HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from word_count_components import TABLE, sentences_by_topology, top_words  # noqa: E402

from executor.sinks.spark import (  # noqa: E402
    SinkTableError,
    SparkStartError,
    describe_read_error,
    read_meta,
    read_table,
    reader_session,
    table_dir,
    table_snapshot,
    verify_table,
)


def say(message: str) -> None:
    """What it is doing, on stderr (Spark takes seconds to start): stdout keeps the answer."""
    print(f"{message} ...", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=TABLE)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--spark-remote", metavar="sc://HOST:PORT",
                    help="read through this Spark Connect server instead of a Spark of its own")
    args = ap.parse_args()
    spark = None
    try:
        read_meta(args.path)  # a missing or broken table is reported before Spark starts
        say(f"connecting to {args.spark_remote} to read {args.path}" if args.spark_remote
            else f"starting Spark to read {args.path}")
        spark = reader_session({"spark.remote": args.spark_remote} if args.spark_remote else None)
        snap = table_snapshot(args.path)  # one snapshot for the check and the counts
        say(f"reading every row of {len(snap.batch_rows)} batches ({sum(snap.batch_rows.values())} rows) "
            f"to check them and add up the counts")
        verify_table(args.path, spark=spark, snapshot=snap)  # every batch read whole: damage is an error
        df = read_table(args.path, spark=spark, snapshot=snap)
        rows, runs = top_words(df, args.n), sentences_by_topology(df)
    except (FileNotFoundError, SinkTableError, SparkStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # py4j and PySpark errors share no base class: one line, no Java trace
        print(f"error: {describe_read_error(exc, table_dir(args.path))}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()
    print(f"top words in {args.path}:")
    for word, count in rows:
        print(f"{count:>10}  {word}")
    if runs:
        # an exactly-once run's figure is the one its `storm-py local` summary says it acked
        print("sentences counted, by topology run (each sentence's word found in no other):")
        for storm_id, n in runs:
            print(f"{n:>10}  {storm_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
