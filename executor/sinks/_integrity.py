"""Damage a sink table can show, found cheaply, and Spark errors turned into one line.

Every committed batch carries a manifest, `<batch dir>/_storm_batch.json`: the rows it holds and
the size of every data file in it, written into the staging directory before the commit's
rename (so it is part of the batch, atomically). Spark skips names starting with "_", so the
manifest is never read as data. Against it a reader finds, with a directory walk and no Spark,
part files that are missing, truncated, emptied (Spark silently reads a 0-byte file as no rows)
or added; and with one count per batch, rows that went missing or appeared. Changed bytes inside
a file are caught by Parquet page checksums (written and verified: see PARQUET_CHECKSUMS) and by
Hadoop's `.crc` side files.

Batches committed before manifests existed are checked for what needs no record: a batch
without any data file, or a 0-byte data file, is damaged.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from executor.sinks import _layout as L
from executor.sinks._log import Entry

MANIFEST = "_storm_batch.json"

# Hadoop keys: write a CRC into every Parquet page header, and check it when reading (pages
# written without one are read unchecked, so older tables stay readable).
PARQUET_CHECKSUMS = {
    "parquet.page.write-checksum.enabled": "true",
    "parquet.page.verify-checksum.enabled": "true",
}


class TableDamagedError(L.SinkTableError):
    """Committed data of a sink table is missing or damaged; the message names the file."""


def _is_data(name: str) -> bool:
    return not name.startswith(("_", "."))


def data_files(batch_dir: Path) -> dict[str, int]:
    """{path relative to the batch dir: size} of the files Spark reads in a batch directory."""
    out = {}
    for root, dirs, files in os.walk(batch_dir):
        dirs[:] = [d for d in dirs if _is_data(d)]
        for name in files:
            if _is_data(name):
                full = os.path.join(root, name)
                out[os.path.relpath(full, batch_dir)] = os.path.getsize(full)
    return out


def write_manifest(staged: Path, rows: int) -> dict[str, Any]:
    """Record what a fully written staged batch holds (before it is committed); returns it."""
    doc = {"rows": rows, "files": data_files(staged)}
    (staged / MANIFEST).write_text(json.dumps(doc, sort_keys=True), encoding="utf-8")
    return doc


def read_manifest(batch_dir: Path) -> dict[str, Any] | None:
    """A batch's manifest; None for a batch committed without one; TableDamagedError if unreadable."""
    path = batch_dir / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TableDamagedError(f"table {batch_dir.parent}: batch manifest {path} is damaged ({exc})") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("rows"), int) and isinstance(doc.get("files"), dict)):
        raise TableDamagedError(f"table {batch_dir.parent}: batch manifest {path} is damaged (unexpected content)")
    return doc


def file_problems(batch_dir: Path, found: Mapping[str, int], manifest: Mapping[str, Any] | None) -> list[str]:
    """What is wrong with a batch directory's data files (one phrase per file). A pure function."""
    if manifest is None:
        if not found:
            return [f"batch directory {batch_dir} holds no part file"]
        return [f"part file {batch_dir / rel} is damaged (0 bytes)" for rel, size in sorted(found.items())
                if size == 0]
    problems = []
    recorded: Mapping[str, int] = manifest["files"]
    for rel, size in sorted(recorded.items()):
        if rel not in found:
            problems.append(f"part file {batch_dir / rel} is missing ({size} bytes when committed)")
        elif found[rel] != size:
            problems.append(f"part file {batch_dir / rel} is damaged ({found[rel]} bytes, {size} when committed)")
    problems += [f"file {batch_dir / rel} was not written by the sink (not in the batch's manifest)"
                 for rel in sorted(set(found) - set(recorded))]
    return problems


def check_files(table: Path, entries: Iterable[Entry]) -> None:
    """Raise TableDamagedError naming the first missing, resized or stray data file of the
    entries (a snapshot's batch and compacted directories) against what their commits recorded."""
    for entry in entries:
        entry_dir = table / entry.path
        recorded = None if any(n < 0 for n in entry.batches.values()) else {"files": entry.files}
        problems = file_problems(entry_dir, data_files(entry_dir), recorded)
        if problems:
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            raise TableDamagedError(f"table {table}: {problems[0]}{more}")


def check_counts(table: Path, counts: Mapping[str, int], entries: Iterable[Entry]) -> None:
    """Compare the rows read per batch ({batch id: rows}) with the rows each batch's commit
    recorded (the snapshot's entries; -1: unknown, a batch from before manifests); raise
    TableDamagedError naming the first batch that differs."""
    listed = set()
    for entry in sorted(entries, key=lambda e: e.path):
        for batch, rows in sorted(entry.batches.items()):
            listed.add(batch)
            if rows >= 0 and counts.get(batch, 0) != rows:
                where = table / entry.path if entry.kind == "batch" else f"{batch} (in {table / entry.path})"
                raise TableDamagedError(f"table {table}: batch {where} reads as {counts.get(batch, 0)} rows, "
                                        f"but {rows} were committed")
    extra = sorted(set(counts) - listed)
    if extra:
        raise TableDamagedError(f"table {table}: rows of batch {extra[0]} were read, but no commit lists it")


# ---- Spark / Java errors as one line ----

_FRAME = re.compile(r"^\s*(at |\.\.\. \d+ more|JVM stacktrace:|Driver stacktrace:)")
_JAVA_CLASS = re.compile(r"\b(?:[a-z_][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error))\b")
_NAMED = re.compile(r"^[A-Z][\w$]*(?:Exception|Error)\b")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?")


def _clean(line: str) -> str:
    line = _SQLSTATE.sub("", line.strip())
    return _JAVA_CLASS.sub(r"\1", line).strip().rstrip(":").strip()


def _lines(exc: BaseException) -> list[str]:
    lines = [ln for ln in str(exc).splitlines() if ln.strip() and not _FRAME.match(ln)]
    return [ln for ln in lines if not ln.startswith("An error occurred while calling")]


def _root_cause(lines: list[str]) -> str:
    causes = [_clean(ln.strip()[len("Caused by:"):]) for ln in lines if ln.strip().startswith("Caused by:")]
    return causes[-1] if causes else ""


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def summarize_error(exc: BaseException, limit: int = 300) -> str:
    """One line for an exception whose text may hold a Java stack trace: its first message line
    and, when different, the deepest 'Caused by' (Java class names without their packages)."""
    lines = _lines(exc)
    text = _clean(lines[0].lstrip(": ")) if lines else ""
    text = text or type(exc).__name__
    cause = _root_cause(lines)
    if cause and cause not in text:
        text = f"{text} (cause: {cause})"
    if not _NAMED.match(text):
        text = f"{type(exc).__name__}: {text}"
    return _short(text, limit)


def damaged_file(text: str, table: Path) -> str | None:
    """The first data file of `table` that an error text names, or None."""
    pattern = re.compile(r"(?:file:)?/*(" + re.escape(str(table).lstrip("/")) + r"/[^\s,'\"\]\)]+)")
    for m in pattern.finditer(text):
        path = "/" + m.group(1).rstrip(".")
        name = os.path.basename(path)
        if name.startswith(".") and name.endswith(".crc"):  # Hadoop's checksum side file: name its data file
            return os.path.join(os.path.dirname(path), name[1:-len(".crc")])
        if _is_data(name):
            return path
    return None


def describe_read_error(exc: BaseException, table: Path) -> str:
    """One line for an error raised while Spark read `table`: the damaged file and the root
    cause when the error names a file of the table, else the summary of the error."""
    if isinstance(exc, L.SinkTableError):
        return str(exc)
    table = Path(table)
    path = damaged_file(str(exc), table)
    if path is None:
        return f"table {table}: reading failed: {summarize_error(exc)}"
    cause = _root_cause(_lines(exc)) or summarize_error(exc)
    cause = re.sub(r"(?:file:)?/*" + re.escape(path.lstrip("/")), "", cause).replace("  ", " ")
    return f"table {table}: part file {path} is damaged ({_short(cause, 200)})"
