"""`storm-py sink ...`: inspect tables written by executor.sinks.spark.SparkSinkBolt.

Kept apart from daemons/cli.py (which adds this group) so that PySpark is imported only when a
sink command runs.
"""

from __future__ import annotations

import logging

import click

from daemons.cli_options import common_options

log = logging.getLogger(__name__)


@click.group()
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


@sink.command()
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0),
              help="Rows to print (oldest commits first).")
@click.option("--no-dedupe", is_flag=True, help="Show replayed duplicates too.")
@common_options
def show(path, limit, no_dedupe, conf):
    """Print the rows of the sink table at PATH and its counts (spark.* keys configure Spark)."""
    from executor.sinks import _layout as L
    from executor.sinks._session import _build_session, _existing_session, spark_settings
    from executor.sinks.spark import read_meta, read_table, table_stats

    try:
        meta = read_meta(path)
    except (FileNotFoundError, L.SinkTableError) as exc:
        raise click.ClickException(str(exc)) from None
    stats = table_stats(path)
    settings = {"spark.log.level": "ERROR", **spark_settings(conf)}
    spark = _existing_session()
    owned = spark is None
    if owned:
        spark = _build_session(settings)
    try:
        raw = read_table(path, dedupe=False, spark=spark)
        total = raw.count()
        keys = meta.get("dedupe_fields")
        df = raw if no_dedupe or not keys else read_table(path, dedupe=True, spark=spark)
        shown = total if df is raw else df.count()
        rows = df.orderBy(L.WRITTEN_AT_COLUMN, L.BATCH_COLUMN).limit(limit).collect() if limit else []
        columns = df.columns
    finally:
        if owned:
            spark.stop()
    leftovers = [n for n in stats["staging"] if not n.endswith(".lock")]
    summary = f"table {L.table_dir(path)} ({meta['format']}): {len(stats['batches'])} batches, {total} rows"
    if keys:
        summary += f", {shown} after dedupe on {keys}" if df is not raw else f" (dedupe on {keys} not applied)"
    summary += f"; staging dirs: {len(leftovers)}"
    click.echo(summary)
    if rows:
        _print_rows(columns, rows)
    click.echo(f"({len(rows)} of {shown} rows shown)")
