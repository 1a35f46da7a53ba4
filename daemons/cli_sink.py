"""`storm-py sink ...`: inspect tables written by executor.sinks.spark.SparkSinkBolt.

Kept apart from daemons/cli.py (which adds this group) so that PySpark is imported only when a
sink command runs.
"""

from __future__ import annotations

import contextlib
import logging

import click

from daemons.cli_options import common_options, group

log = logging.getLogger(__name__)


@group()
def sink() -> None:
    """Inspect tables written by the Spark sink bolt."""


def _format_value(v) -> str:
    text = "null" if v is None else str(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _print_rows(columns: list[str], rows: list) -> None:
    cells = [[_format_value(r[c]) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _progress(message: str) -> None:
    """What the command is doing, on stderr (stdout keeps only its answer): starting Spark and
    reading a large table take seconds to minutes."""
    click.echo(f"{message} ...", err=True)


def _fail(message: str) -> None:
    """One `error:` line on stderr and exit status 1 (never a traceback)."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(1)


@contextlib.contextmanager
def _spark_on(table, conf, doing: str):
    """This process's SparkSession (or a quiet one of its own, stopped at the end) for work on
    `table`; any failure inside is one `error:` line naming the table, never a Java trace."""
    from executor.sinks import _layout as L
    from executor.sinks._session import (
        SparkStartError,
        _build_session,
        _existing_session,
        describe_spark,
        quiet_reader_settings,
    )
    from executor.sinks.spark import describe_read_error

    # Quiet: a failure is reported here in one line; Spark's ERROR log would print its trace.
    spark = _existing_session()
    owned = spark is None
    try:
        if owned:
            settings = quiet_reader_settings(conf)
            _progress(f"starting Spark ({describe_spark(settings)}) to {doing} {table}")
            spark = _build_session(settings)
        yield spark
    except SparkStartError as exc:
        _fail(f"table {table}: cannot {doing} it: {exc}")
    except L.SinkTableError as exc:
        _fail(str(exc))
    except Exception as exc:  # py4j and PySpark errors share no base class
        log.debug("%s %s failed", doing, table, exc_info=True)
        _fail(describe_read_error(exc, table))
    finally:
        if owned and spark is not None:
            spark.stop()


@sink.command()
@click.argument("path")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0),
              help="Rows to print (oldest commits first).")
@click.option("--no-dedupe", is_flag=True, help="Show replayed duplicates too.")
@common_options
def show(path, limit, no_dedupe, conf):
    """Print the rows of the sink table at PATH and its counts (spark.* keys configure Spark).

    Every row is read once and each batch's row count checked against its commit record, so a
    damaged table is reported (naming the file) rather than shown short or altered.
    """
    from executor.sinks import _layout as L
    from executor.sinks._integrity import check_files
    from executor.sinks.spark import read_meta, read_table, table_snapshot, table_stats, verify_table

    try:
        table = L.table_dir(path)
        meta = read_meta(path)
        # One snapshot for the check, the count and the rows: commits and compactions meanwhile
        # change nothing shown.
        snap = table_snapshot(path)
        stats = table_stats(path, snapshot=snap)
        # Missing, emptied or truncated files, before Spark starts (a directory walk).
        check_files(table, snap.entries.values())
    except (FileNotFoundError, L.SinkTableError) as exc:
        _fail(str(exc))
    committed = sum(snap.batch_rows.values())
    with _spark_on(table, conf, "read") as spark:
        _progress(f"reading every row of {len(stats['batches'])} batches ({committed} rows by their commit "
                  f"records, {stats['files']} files) to check them")
        total = verify_table(path, spark=spark, snapshot=snap)
        keys = meta.get("dedupe_fields")
        df = read_table(path, dedupe=not no_dedupe and bool(keys), spark=spark, snapshot=snap)
        if no_dedupe or not keys:
            shown = total
        else:
            _progress(f"counting the rows after dedupe on {keys}")
            shown = df.count()
        rows = df.orderBy(L.WRITTEN_AT_COLUMN, L.BATCH_COLUMN).limit(limit).collect() if limit else []
        columns = df.columns
    leftovers = [n for n in stats["staging"] if not n.endswith(".lock")]
    summary = (f"table {table} ({meta['format']}): {len(stats['batches'])} batches in {stats['batch_dirs']} "
               f"batch and {stats['compacted_dirs']} compacted directories ({stats['files']} files), {total} rows")
    if keys:
        summary += f" (dedupe on {keys} not applied)" if no_dedupe else f", {shown} after dedupe on {keys}"
    summary += f"; staging dirs: {len(leftovers)}"
    click.echo(summary)
    if rows:
        _print_rows(columns, rows)
    click.echo(f"({len(rows)} of {shown} rows shown)")


@sink.command()
@click.argument("path")
@common_options
def compact(path, conf):
    """Compact the sink table at PATH now: merge its small batches (any two or more) into larger
    files (up to sink.compaction.target.mb each), then delete superseded files older than
    sink.retention.secs.

    Safe while topologies write the table and readers read it: each row stays readable exactly
    once; one compaction runs per table at a time (another one running: nothing to do).
    """
    from executor.sinks import _layout as L
    from executor.sinks.spark import compact_table, read_meta, table_stats

    try:
        table = L.table_dir(path)
        read_meta(path)
        before = table_stats(path)
    except (FileNotFoundError, L.SinkTableError) as exc:
        _fail(str(exc))
    with _spark_on(table, conf, "compact") as spark:
        _progress(f"compacting {before['batch_dirs'] + before['compacted_dirs']} directories "
                  f"({before['files']} files) of {table}")
        runs = compact_table(path, spark=spark, conf=conf, on_run=_run_done)
        after = table_stats(path)
    if any(r.status == "busy" for r in runs):
        click.echo(f"table {table}: another compaction holds the table's lease; nothing done")
    click.echo(compaction_summary(str(table), runs, before, after, rows_held(path)))


def _run_done(n: int, result) -> None:
    if result.status == "compacted":
        _progress(f"run {n}: merged {result.inputs} entries ({result.rows} rows)")


def rows_held(path) -> int:
    """The rows the table holds now, by its commit records (no Spark)."""
    from executor.sinks.spark import table_snapshot

    return sum(table_snapshot(path).batch_rows.values())


def compaction_summary(table: str, runs: list, before: dict, after: dict, held: int) -> str:
    """The line `sink compact` ends with. Runs merge the outputs of earlier runs again, so the
    rows they rewrote add up to more than the table holds: both are said, apart."""
    merged = [r for r in runs if r.status == "compacted"]
    rewritten = sum(r.rows for r in merged)
    again = " (a row merged again by a later run counts again)" if len(merged) > 1 else ""
    return (f"table {table}: {len(merged)} compaction run(s) merged {sum(r.inputs for r in merged)} entries, "
            f"rewriting {rewritten} rows{again}; the table holds {held} rows; directories read: "
            f"{before['batch_dirs'] + before['compacted_dirs']} -> {after['batch_dirs'] + after['compacted_dirs']}, "
            f"files: {before['files']} -> {after['files']}; superseded directories deleted: "
            f"{sum(len(r.deleted) for r in runs)}")
