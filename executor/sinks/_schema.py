"""Column types for a sink table: inferred from the first batch, then enforced on every batch.

The sink hands rows to Spark with `verifySchema=False`, because Spark's per-row verification
costs more than the write. Spark then silently turns a value of the wrong type into null (an
int in a double column, a string in a bigint column). So the sink checks the types itself, per
column with C-speed set(map(type, ...)), converts what converts without loss (int -> float,
int -> Decimal), and rejects the rows that do not fit: their tuples are failed with an error
naming the field, instead of landing in the table as nulls.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections import Counter
from typing import Any, Sequence

_NONE = type(None)
_SAMPLE = 1000  # values looked at to infer an array's element or a map's value type


def _scalar_type(py: type, sample: Sequence[Any]):
    from pyspark.sql import types as T

    if py is bool:
        return T.BooleanType()
    if py is int:
        return T.LongType()
    if py is float:
        return T.DoubleType()
    if py is str:
        return T.StringType()
    if py in (bytes, bytearray):
        return T.BinaryType()
    if py is datetime.datetime:
        return T.TimestampType()
    if py is datetime.date:
        return T.DateType()
    if py is decimal.Decimal:
        return T.DecimalType(38, 18)
    if py in (list, tuple):
        elems = [e for v in sample[:_SAMPLE] for e in v]
        return T.ArrayType(infer_type(elems))
    if py is dict:
        keys = [k for v in sample[:_SAMPLE] for k in v]
        vals = [x for v in sample[:_SAMPLE] for x in v.values()]
        return T.MapType(infer_type(keys) if keys else T.StringType(), infer_type(vals))
    return T.StringType()


def infer_type(values: Sequence[Any]):
    """The Spark type for a column holding `values`: the most common Python type wins (the rows
    of other types are rejected later); ints with floats make a double; all-null is a string."""
    from pyspark.sql import types as T

    counts = Counter(map(type, values))
    counts.pop(_NONE, None)
    if not counts:
        return T.StringType()
    kinds = set(counts)
    if float in kinds and kinds <= {int, float}:
        return T.DoubleType()
    py = counts.most_common(1)[0][0]
    return _scalar_type(py, [v for v in values if type(v) is py])


def infer_schema(columns: Sequence[str], rows: Sequence[Sequence[Any]]):
    from pyspark.sql import types as T

    cols = list(zip(*rows)) if rows else [() for _ in columns]
    return T.StructType([T.StructField(name, infer_type(col), True) for name, col in zip(columns, cols)])


def _int_range(dt) -> tuple[int, int] | None:
    from pyspark.sql import types as T

    bits = {T.LongType: 64, T.IntegerType: 32, T.ShortType: 16, T.ByteType: 8}.get(type(dt))
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if bits else None


def _rule(dt) -> tuple[frozenset | None, dict]:
    """(Python types accepted for Spark type dt, {python type: converter}); None accepts anything."""
    from pyspark.sql import types as T

    if isinstance(dt, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return frozenset({int}), {}
    if isinstance(dt, (T.DoubleType, T.FloatType)):
        return frozenset({float, int}), {int: float}
    if isinstance(dt, T.StringType):
        return frozenset({str}), {}
    if isinstance(dt, T.BooleanType):
        return frozenset({bool}), {}
    if isinstance(dt, T.BinaryType):
        return frozenset({bytes, bytearray}), {}
    if isinstance(dt, T.ArrayType):
        return frozenset({list, tuple}), {}
    if isinstance(dt, T.MapType):
        return frozenset({dict}), {}
    if isinstance(dt, T.TimestampType):
        return frozenset({datetime.datetime}), {}
    if isinstance(dt, T.DateType):
        return frozenset({datetime.date}), {}
    if isinstance(dt, T.DecimalType):
        return frozenset({decimal.Decimal, int}), {int: decimal.Decimal}
    return None, {}


def conform(schema, rows: list) -> tuple[list, dict[int, str]]:
    """Check rows against schema; return (the rows to write, {index of a rejected row: why}).

    Fast path: when every column already has the right types the rows are returned as they are.
    """
    if not rows:
        return rows, {}
    cols = None
    bad: dict[int, str] = {}
    converted: dict[int, list] = {}
    for i, field in enumerate(schema.fields):
        allowed, converters = _rule(field.dataType)
        if allowed is None:
            continue
        if cols is None:
            cols = list(zip(*rows))
        col = cols[i]
        kinds = set(map(type, col))
        kinds.discard(_NONE)
        if kinds - allowed:
            for j, v in enumerate(col):
                if v is not None and type(v) not in allowed and j not in bad:
                    bad[j] = (f"field {field.name!r}: {type(v).__name__} value {v!r:.80} does not fit "
                              f"column type {field.dataType.simpleString()}")
        bounds = _int_range(field.dataType)
        if bounds is not None and kinds == {int}:
            lo, hi = bounds
            present = [v for v in col if v is not None] if None in col else col
            if min(present) < lo or max(present) > hi:
                for j, v in enumerate(col):
                    if v is not None and not lo <= v <= hi and j not in bad:
                        bad[j] = (f"field {field.name!r}: {v} is out of range for column type "
                                  f"{field.dataType.simpleString()}")
        if kinds & set(converters):
            converted[i] = [converters[type(v)](v) if type(v) in converters else v for v in col]
    if not bad and not converted:
        return rows, {}
    assert cols is not None
    for i, col in converted.items():
        cols[i] = col
    out = [row for j, row in enumerate(zip(*cols)) if j not in bad]
    return out, bad


# ---- rows to Spark as one JSON document ----
#
# Handing rows over with createDataFrame costs ~65 py4j round trips per write, and while the
# executors keep the GIL busy each round trip waits for a GIL switch (5 ms, often several), so a
# 10,000-row write took ~1.8 s on a busy worker against ~0.2 s idle. Instead the batch is encoded
# by one C-speed json.dumps call into a file in the staging directory and read back by one SQL
# statement: about 10 round trips. The file holds one JSON object: the write time and an array
# of rows (arrays); Spark parses each row as array<string> (non-string values arrive as their
# JSON text) and casts each element to its column type.

def _json_default(o):
    if isinstance(o, datetime.datetime):
        # Naive datetimes are local time, as PySpark's createDataFrame takes them.
        return (o if o.tzinfo is not None else o.astimezone()).isoformat()
    if isinstance(o, datetime.date):
        return o.isoformat()
    if isinstance(o, decimal.Decimal):
        return str(o)
    if isinstance(o, (bytes, bytearray)):
        return base64.b64encode(o).decode("ascii")
    raise TypeError(f"{type(o).__name__} value {o!r:.80} cannot be stored by the Spark sink")


def encode_batch(rows, written_at: str) -> str:
    """The JSON document json_query reads: the write time and the rows (arrays)."""
    body = json.dumps(rows, ensure_ascii=True, separators=(",", ":"), check_circular=False,
                      default=_json_default)
    return f'{{"t":{json.dumps(written_at)},"r":{body}}}'


def _nested_ok(dt) -> bool:
    from pyspark.sql import types as T

    if isinstance(dt, (T.StringType, T.BooleanType, T.LongType, T.IntegerType, T.ShortType, T.ByteType,
                       T.DoubleType, T.FloatType, T.BinaryType, T.TimestampType, T.DateType)):
        return True
    if isinstance(dt, T.ArrayType):
        return _nested_ok(dt.elementType)
    if isinstance(dt, T.MapType):  # JSON object keys are strings
        return isinstance(dt.keyType, T.StringType) and _nested_ok(dt.valueType)
    return False


def _column_expr(dt, i: int) -> str | None:
    from pyspark.sql import types as T

    a = f"a[{i}]"
    if isinstance(dt, T.StringType):
        return a
    if isinstance(dt, (T.DoubleType, T.FloatType)):
        # NaN and Infinity arrive quoted.
        return f"CAST(replace({a}, '\"', '') AS {dt.simpleString()})"
    if isinstance(dt, (T.BooleanType, T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DecimalType,
                       T.DateType, T.TimestampType)):
        return f"CAST({a} AS {dt.simpleString()})"
    if isinstance(dt, T.BinaryType):
        return f"unbase64({a})"
    if isinstance(dt, (T.ArrayType, T.MapType)) and _nested_ok(dt):
        return f"from_json({a}, '{dt.simpleString()}')"
    return None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def json_columns(schema) -> str | None:
    """The SELECT list turning the rows of a file written by encode_batch (as `a`, one array per
    row) into the schema's columns; None when a column type cannot travel as JSON (such tables
    are written through createDataFrame instead)."""
    exprs = []
    for i, field in enumerate(schema.fields):
        e = _column_expr(field.dataType, i)
        if e is None:
            return None
        exprs.append(f"{e} AS {_quote(field.name)}")
    return ", ".join(exprs)


def json_query(columns: str, source_uri: str, extra: Sequence[str] = ()) -> str:
    """One SQL statement reading a file written by encode_batch: `columns`, the write time as
    `t`, and `extra` expressions.

    The write time comes from the file, not from a literal: a literal that changes with every
    batch makes Spark generate and compile new code for every write, which doubled the JVM CPU
    a write costs (~0.3 s instead of ~0.15 s).
    """
    select = ", ".join([columns, *extra])
    source = source_uri.replace("`", "``")
    return (f"SELECT /*+ COALESCE(1) */ {select} FROM (SELECT from_json(value, "
            f"'struct<t:string,r:array<array<string>>>') AS j FROM text.`{source}`) "
            f"LATERAL VIEW explode(j.r) rows AS a")
