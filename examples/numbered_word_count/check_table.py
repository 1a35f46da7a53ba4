"""Compare the numbered word count's table with what the source sent: prints one JSON object.

usage: python3 examples/numbered_word_count/check_table.py TABLE --messages N

  rows        rows in the table (replays included)
  distinct    distinct (msg, pos) among the rows that belong there
  deduped     rows of the dedupe read (read_table's default: one per (msg, pos))
  expected    N * WORDS_PER_MESSAGE
  missing     messages 0..N-1 not wholly in the table (must be 0); missing_first: the first few
  duplicates  rows - distinct (rows repeated by replays)
  wrong       rows that are not a word of a sent message (msg out of range, or word not the one
              sent at that position; must be 0)
  ok          missing == 0, wrong == 0 and deduped == distinct == expected

Exit code 0 when ok, 1 when not, 2 when the table cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from numbered_components import VOCABULARY, WORDS_PER_MESSAGE  # noqa: E402

from executor.sinks.spark import read_table, reader_session, verify_table  # noqa: E402


def summarize(rows: int, distinct: int, deduped: int, complete: int, wrong: int, messages: int,
              missing_first: list[int]) -> dict:
    """The verdict from the counts Spark computed (pure)."""
    expected = messages * WORDS_PER_MESSAGE
    missing = messages - complete
    return {"rows": rows, "distinct": distinct, "deduped": deduped, "expected": expected,
            "messages": messages, "missing": missing, "missing_first": missing_first,
            "duplicates": rows - wrong - distinct, "wrong": wrong,
            "ok": missing == 0 and wrong == 0 and deduped == distinct == expected}


def check(path: str, messages: int, spark) -> dict:
    from pyspark.sql import functions as F

    verify_table(path, spark=spark)  # every batch read whole: damage is an error, not a short count
    df = read_table(path, dedupe=False, spark=spark)
    vocab = F.array(*[F.lit(w) for w in VOCABULARY])
    # numbered_components.word_index, in Spark.
    sent = F.element_at(vocab, ((F.col("msg") * 31 + F.col("pos") * 17) % len(VOCABULARY) + 1).cast("int"))
    valid = (F.col("msg").between(0, messages - 1) & F.col("pos").between(0, WORDS_PER_MESSAGE - 1)
             & (F.col("word") == sent))
    df = df.withColumn("valid", F.coalesce(valid, F.lit(False)))
    totals = df.agg(F.count(F.lit(1)), F.sum((~F.col("valid")).cast("long"))).first()
    rows, wrong = int(totals[0]), int(totals[1] or 0)
    per_msg = df.where(F.col("valid")).groupBy("msg").agg(F.countDistinct("pos").alias("n")).cache()
    sums = per_msg.agg(F.sum("n"), F.sum((F.col("n") == WORDS_PER_MESSAGE).cast("long"))).first()
    distinct, complete = int(sums[0] or 0), int(sums[1] or 0)
    missing_first = []
    if complete < messages:
        whole = per_msg.where(F.col("n") == WORDS_PER_MESSAGE).select("msg")
        missing_first = [r[0] for r in spark.range(messages).withColumnRenamed("id", "msg")
                         .join(whole, "msg", "left_anti").orderBy("msg").limit(10).collect()]
    per_msg.unpersist()
    deduped = read_table(path, spark=spark).count()
    return summarize(rows, distinct, deduped, complete, wrong, messages, missing_first)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table")
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--spark-remote", metavar="sc://HOST:PORT",
                    help="read through this Spark Connect server instead of a Spark of its own")
    args = ap.parse_args()
    spark = None
    try:
        spark = reader_session({"spark.remote": args.spark_remote} if args.spark_remote else None)
        # Spark's default of 200 shuffle partitions costs more than the work on one local core.
        spark.conf.set("spark.sql.shuffle.partitions", "4")
        result = check(args.table, args.messages, spark)
    except Exception as exc:  # py4j and PySpark errors share no base class: one line
        print(f"error: cannot check {args.table}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)
        return 2
    finally:
        if spark is not None:
            spark.stop()
    print(json.dumps(result, sort_keys=True))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
