"""Print the most frequent words stored by the word_count example, read back from its table.

usage: python3 examples/word_count/top_words.py [PATH] [-n 10]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from word_count_components import TABLE, top_words  # noqa: E402

from executor.sinks.spark import read_table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=TABLE)
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    try:
        df = read_table(args.path)  # starts a local SparkSession
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"top words in {args.path}:")
        for word, count in top_words(df, args.n):
            print(f"{count:>10}  {word}")
    finally:
        df.sparkSession.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
