"""The code package: a zip of a topology file's directory plus a manifest (storm-manifest.json).

The manifest describes the topology as data (its structure, the topology file's name, the
topology conf without secrets) and lists every file with its size and sha256, so Nimbus can
validate and schedule a topology without importing user code, and any holder of the zip can
check it. A package is untrusted input wherever it is read: every entry name is checked before
anything is written, sizes are bounded by `storm.package.max.bytes` (counting the bytes actually
decompressed, never the declared ones), and extraction writes only inside a fresh temp dir that
is renamed into place once every file matched its digest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from cluster_state.secrets import is_secret_key, masked_value
from executor.errors import ClearError, InvalidTopologyError
from executor.structure import TopologyStructure

log = logging.getLogger(__name__)

MANIFEST_NAME = "storm-manifest.json"
FORMAT_VERSION = 1
MAX_BYTES_KEY = "storm.package.max.bytes"
MAX_ENTRIES = 50_000  # far above any real topology directory; bounds the work a zip can ask for
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024
# Fixed zip metadata so the same directory gives byte-identical packages.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_FILE_MODE = 0o644
_UNIX = 3

EXCLUDED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".venv", "venv", ".pytest_cache",
                           ".mypy_cache", ".ruff_cache", ".tox", "node_modules"})
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
# Keys only daemons act on (where ZooKeeper is, local dirs, Nimbus's and the supervisors' own
# settings): a worker takes them from its supervisor's config, never from a topology's, so a
# submitter's `-c storm.zookeeper.port=1` cannot cut every worker off from ZooKeeper.
DAEMON_KEY_PREFIXES = ("storm.zookeeper.", "nimbus.", "supervisor.", "ui.", "logviewer.", "drpc.",
                       "pacemaker.", "dev.zookeeper.", "storm.messaging.curve.")
DAEMON_KEYS = frozenset({"storm.local.dir", "storm.local.hostname", "storm.log.dir", "storm.package.max.bytes"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DRIVE = re.compile(r"[A-Za-z]:")


class PackageError(InvalidTopologyError, ClearError):
    """A package is malformed, unsafe or too large; the message names the package and entry."""


def _error(package: Any, problem: str, entry: str | None = None) -> PackageError:
    where = f"package {package}" + (f": entry {entry!r}" if entry is not None else "")
    return PackageError(f"{where}: {problem}")


@dataclass(frozen=True)
class PackagedFile:
    path: str  # posix path relative to the package root
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    format_version: int
    storm_py_version: str
    topology_file: str  # the topology file's name, at the package root
    structure_data: Mapping[str, Any]  # TopologyStructure.to_dict() form
    conf: Mapping[str, Any]  # the topology conf, secrets removed
    files: tuple[PackagedFile, ...]  # sorted by path; the manifest itself is not listed
    checksum: str  # content_checksum(files)

    def structure(self) -> TopologyStructure:
        """The structure as data (parsed; call validate_structure() for the topology rules)."""
        return TopologyStructure.from_dict(self.structure_data, source=f"{MANIFEST_NAME} structure")

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": self.format_version, "storm_py_version": self.storm_py_version,
                "topology_file": self.topology_file, "structure": self.structure_data, "conf": self.conf,
                "files": {f.path: {"size": f.size, "sha256": f.sha256} for f in self.files},
                "checksum": self.checksum}

    def to_json_bytes(self) -> bytes:
        return (json.dumps(self.to_dict(), sort_keys=True, indent=1, allow_nan=False) + "\n").encode("utf-8")


# ---- pure decisions ----
def without_secrets(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of conf without the keys that hold secrets (never copied into a topology's conf)."""
    return {k: v for k, v in conf.items() if not is_secret_key(k)}


def masked(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of conf showing every key, its secrets (nested ones too) replaced by MASK (what a UI
    may display)."""
    return {k: masked_value(k, v) for k, v in conf.items()}


def is_daemon_key(key: Any) -> bool:
    k = str(key)
    return k in DAEMON_KEYS or k.startswith(DAEMON_KEY_PREFIXES)


def without_daemon_keys(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of conf without the daemon-level keys (a topology's conf never carries them)."""
    return {k: v for k, v in conf.items() if not is_daemon_key(k)}


def daemon_keys_note(keys: Iterable[str], where: str) -> str | None:
    """What to tell a submitter whose topology conf names daemon keys (None: it names none)."""
    keys = sorted(set(keys))
    if not keys:
        return None
    return (f"{where}: {', '.join(keys)} {'applies' if len(keys) == 1 else 'apply'} to the daemons, not to a "
            f"topology: not sent with it (each supervisor's workers take "
            f"{'it' if len(keys) == 1 else 'them'} from that supervisor's own storm.yaml)")


def content_checksum(files: Iterable[PackagedFile]) -> str:
    """sha256 over every file's path and digest, sorted by path: one value for the content."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{f.sha256}\n".encode("utf-8"))
    return h.hexdigest()


def entry_name_problem(name: str) -> str | None:
    """Why a zip entry name is unsafe to extract, or None. Only plain relative file paths pass."""
    if not name:
        return "empty name"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "control character in name"
    if "\\" in name:
        return "backslash in name (only '/' separates directories)"
    if name.startswith("/"):
        return "absolute path"
    parts = name.split("/")
    if _DRIVE.match(parts[0]):
        return "drive letter in name"
    if name.endswith("/"):
        return "directory entry (a package holds files only)"
    for part in parts:
        if part == "..":
            return "'..' component (would escape the extraction directory)"
        if part in ("", "."):
            return "empty or '.' component"
    return None


def topology_file_problem(name: str) -> str | None:
    """A package's topology file is at its root, or in `topologies/` (a streamparse project's
    package holds the project); None when `name` is one of those."""
    parts = name.split("/")
    if len(parts) == 2 and parts[0] == "topologies":
        parts = parts[1:]
    if len(parts) != 1 or parts[0] in ("", ".", "..") or entry_name_problem(name):
        return "must be a file name at the package root (or in topologies/ for a streamparse project)"
    return None


def entry_type_problem(info: zipfile.ZipInfo) -> str | None:
    """Why an entry is not a plain file (links, devices, directories), judged by its unix mode."""
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind in (0, stat.S_IFREG):
        if info.flag_bits & 0x1:
            return "encrypted entry"
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return f"unsupported compression method {info.compress_type}"
        return None
    names = {stat.S_IFLNK: "symbolic link", stat.S_IFDIR: "directory", stat.S_IFCHR: "character device",
             stat.S_IFBLK: "block device", stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket"}
    return f"{names.get(kind, f'file type {kind:o}')} entry (a package holds plain files only)"


def excluded_dir(name: str, has_pyvenv_cfg: bool) -> bool:
    return name in EXCLUDED_DIRS or has_pyvenv_cfg


def excluded_file(name: str) -> bool:
    return name.endswith(EXCLUDED_SUFFIXES) or name == ".git"  # a .git file: a worktree's pointer


def size_problem(total: int, max_bytes: int) -> str | None:
    if total > max_bytes:
        return f"{total} bytes, over {MAX_BYTES_KEY} ({max_bytes} bytes)"
    return None


def storm_py_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("storm-py")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown"


# ---- building ----
def _list_files(src: Path, skip: Path | None) -> list[tuple[str, Path]]:
    """(zip name, path) of every file to package, sorted; a link or special file is an error."""
    out: list[tuple[str, Path]] = []
    pending = [src]
    while pending:
        directory = pending.pop()
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            path = Path(e.path)
            if e.is_symlink():
                if e.name in EXCLUDED_DIRS:  # e.g. a .venv link to a shared virtualenv
                    continue
                raise PackageError(f"{path} is a symbolic link; links are never packaged "
                                   f"(replace it with a copy of its target or remove it)")
            if e.is_dir(follow_symlinks=False):
                if not excluded_dir(e.name, (path / "pyvenv.cfg").exists()):
                    pending.append(path)
                continue
            if excluded_file(e.name) or (skip is not None and path == skip):
                continue
            if not e.is_file(follow_symlinks=False):
                raise PackageError(f"{path} is not a regular file (a FIFO, socket or device); "
                                   f"it cannot be packaged")
            name = path.relative_to(src).as_posix()
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                raise PackageError(f"{path}: file name is not valid UTF-8; rename it to package it") from None
            problem = entry_name_problem(name)
            if problem:
                raise PackageError(f"{path}: cannot be packaged: {problem}")
            if name == MANIFEST_NAME:
                raise PackageError(f"{path}: {MANIFEST_NAME} is reserved for the package manifest")
            out.append((name, path))
    out.sort()
    if len(out) > MAX_ENTRIES:
        raise PackageError(f"{src} holds {len(out)} files to package, more than {MAX_ENTRIES}")
    return out


def _zip_info(name: str, size: int = 0) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = _UNIX
    info.external_attr = (stat.S_IFREG | _FILE_MODE) << 16
    info.file_size = size  # lets zipfile choose zip64 up front for a large file
    return info


def _conf_for_manifest(conf: Mapping[str, Any]) -> dict[str, Any]:
    removed = sorted(str(k) for k in conf if is_secret_key(k))
    if removed:
        log.warning("secret keys left out of the package's topology conf: %s", ", ".join(removed))
    clean = without_secrets(conf)
    for key, value in clean.items():
        if not isinstance(key, str):
            raise PackageError(f"topology conf key {key!r} is not a string")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise PackageError(f"topology conf key {key!r}: value cannot be stored in the package "
                               f"manifest as JSON ({exc})") from None
    return json.loads(json.dumps(clean))  # tuples become lists, as a reader will see them


def build_package(src_dir: str | os.PathLike, topology_file_name: str, out_path: str | os.PathLike, *,
                  structure: Mapping[str, Any], conf: Mapping[str, Any], max_bytes: int) -> Manifest:
    """Zip src_dir (the topology file's directory, the file at the root) with a manifest into
    out_path, written to a temp file beside it and renamed, so no half-written package appears."""
    src = Path(src_dir).resolve()
    out = Path(out_path).absolute()
    if not src.is_dir():
        raise PackageError(f"{src} is not a directory")
    if topology_file_problem(topology_file_name):
        raise PackageError(f"topology file {topology_file_name!r} {topology_file_problem(topology_file_name)} "
                           f"of {src}")
    top = src / topology_file_name
    if top.is_symlink() or not top.is_file():
        raise PackageError(f"topology file {top} is not a regular file in {src}")
    conf_data = _conf_for_manifest(conf)
    try:
        structure_data = json.loads(json.dumps(structure, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise PackageError(f"topology structure cannot be stored as JSON: {exc}") from None
    TopologyStructure.from_dict(structure_data, source="topology structure")  # fail before writing
    skip = out.parent.resolve() / out.name
    try:
        files = _list_files(src, skip)
    except OSError as exc:
        raise PackageError(f"cannot read {src}: {exc}") from None
    if topology_file_name not in {name for name, _ in files}:
        raise PackageError(f"topology file {top} is excluded from the package")
    listed = sum(p.stat().st_size for _, p in files)
    problem = size_problem(listed, max_bytes)
    if problem:
        raise PackageError(f"{src}: package would hold {problem}; raise the key or remove files")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        entries = _write_zip(tmp, files, src, max_bytes, topology_file_name, structure_data, conf_data)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("built package %s: %d files, %d bytes of content", out, len(entries.files), entries.total_bytes)
    return entries


def _write_zip(tmp: Path, files: list[tuple[str, Path]], src: Path, max_bytes: int, topology_file: str,
               structure_data: dict, conf_data: dict) -> Manifest:
    packaged = []
    total = 0
    with zipfile.ZipFile(tmp, "w") as zf:
        for name, path in files:
            h = hashlib.sha256()
            size = 0
            try:
                with open(path, "rb") as f, zf.open(_zip_info(name, os.fstat(f.fileno()).st_size), "w") as w:
                    while chunk := f.read(_CHUNK):
                        size += len(chunk)
                        total += len(chunk)
                        if total > max_bytes:  # the file grew since it was listed
                            raise PackageError(f"{src}: package would hold {size_problem(total, max_bytes)}")
                        h.update(chunk)
                        w.write(chunk)
            except OSError as exc:
                raise PackageError(f"cannot package {path}: {exc}") from None
            packaged.append(PackagedFile(name, size, h.hexdigest()))
        files_t = tuple(packaged)
        manifest = Manifest(FORMAT_VERSION, storm_py_version(), topology_file, structure_data, conf_data,
                            files_t, content_checksum(files_t))
        zf.writestr(_zip_info(MANIFEST_NAME), manifest.to_json_bytes())
    return manifest


def file_checksum(path: str | os.PathLike) -> str:
    """sha256 hex of a whole file (the package as uploaded or downloaded)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# ---- reading ----
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError,
               ValueError)


def _open_zip(path: Path) -> zipfile.ZipFile:
    if not path.is_file():
        raise _error(path, "does not exist or is not a file")
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
        raise _error(path, f"not a readable zip archive (truncated or not a zip?): {exc}") from None
    except OSError as exc:
        raise _error(path, f"cannot be read: {exc}") from None


def _check_entries(path: Path, infos: list[zipfile.ZipInfo], max_bytes: int) -> dict[str, zipfile.ZipInfo]:
    if len(infos) > MAX_ENTRIES + 1:
        raise _error(path, f"holds {len(infos)} entries, more than {MAX_ENTRIES}")
    by_name: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name = info.filename
        problem = entry_name_problem(name) or entry_type_problem(info)
        if problem:
            raise _error(path, problem, name)
        if name in by_name:
            raise _error(path, "duplicate entry name", name)
        by_name[name] = info
        total += info.file_size
        problem = size_problem(total, max_bytes)
        if problem:
            raise _error(path, f"declared sizes total {problem}", name)
    dirs = {"/".join(n.split("/")[:i]) for n in by_name for i in range(1, n.count("/") + 1)}
    clash = sorted(dirs & by_name.keys())
    if clash:
        raise _error(path, "is both a file and a directory of other entries", clash[0])
    return by_name


def read_manifest(zip_path: str | os.PathLike, *, max_bytes: int) -> Manifest:
    """Open a package and check everything that needs no decompression of user files: entry
    names and types, entry count, declared sizes, the manifest and its agreement with the zip."""
    path = Path(zip_path)
    with _open_zip(path) as zf:
        return _read(path, zf, max_bytes)[0]


def _read(path: Path, zf: zipfile.ZipFile,
          max_bytes: int) -> tuple[Manifest, dict[str, zipfile.ZipInfo], bytes]:
    by_name = _check_entries(path, zf.infolist(), max_bytes)
    info = by_name.get(MANIFEST_NAME)
    if info is None:
        raise _error(path, "missing at the zip's root (not a storm-py package? make one with "
                           "`storm-py jar build`)", MANIFEST_NAME)
    limit = min(MAX_MANIFEST_BYTES, max_bytes)
    try:
        with zf.open(info) as f:
            raw = f.read(limit + 1)
    except _ZIP_ERRORS as exc:
        raise _error(path, f"cannot be read: {exc}", MANIFEST_NAME) from None
    if len(raw) > limit:
        raise _error(path, f"larger than {limit} bytes", MANIFEST_NAME)
    manifest = parse_manifest(raw, f"package {path}: entry {MANIFEST_NAME!r}")
    listed = {f.path: f for f in manifest.files}
    for name, f in listed.items():
        entry = by_name.get(name)
        if entry is None:
            raise _error(path, "listed in the manifest but absent from the zip", name)
        if entry.file_size != f.size:
            raise _error(path, f"zip declares {entry.file_size} bytes, the manifest {f.size}", name)
    for name in by_name:
        if name != MANIFEST_NAME and name not in listed:
            raise _error(path, "not listed in the manifest", name)
    return manifest, by_name, raw


def parse_manifest(raw: bytes, source: str) -> Manifest:
    """The manifest from its JSON bytes; every malformed field raises PackageError naming it."""

    def bad(problem: str) -> PackageError:
        return PackageError(f"{source}: {problem}")

    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise bad(f"must be a JSON object, got {type(data).__name__}")
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad(f"format_version must be an integer, got {version!r:.80}")
    if version > FORMAT_VERSION:
        raise bad(f"format_version {version} was written by a newer storm-py; this storm-py "
                  f"({storm_py_version()}) reads format {FORMAT_VERSION}")
    if version != FORMAT_VERSION:
        raise bad(f"unknown format_version {version} (this storm-py reads format {FORMAT_VERSION})")

    def field(key: str, kind: type, what: str) -> Any:
        value = data.get(key)
        if not isinstance(value, kind):
            raise bad(f"{key} must be {what}, got {value!r:.80}")
        return value

    topology_file = field("topology_file", str, "a string")
    if topology_file_problem(topology_file):
        raise bad(f"topology_file {topology_file!r} {topology_file_problem(topology_file)}")
    conf = field("conf", dict, "an object")
    structure_data = field("structure", dict, "an object")
    try:
        TopologyStructure.from_dict(structure_data, source=f"{source}: structure")
    except PackageError:
        raise
    except InvalidTopologyError as exc:
        raise PackageError(str(exc)) from None
    files = []
    for name, entry in sorted(field("files", dict, "an object").items()):
        where = f"files[{name!r}]"
        if name == MANIFEST_NAME or entry_name_problem(name):
            raise bad(f"{where}: not a valid file path ({entry_name_problem(name) or 'reserved name'})")
        if not isinstance(entry, dict):
            raise bad(f"{where} must be an object, got {entry!r:.80}")
        size, digest = entry.get("size"), entry.get("sha256")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise bad(f"{where}.size must be an integer >= 0, got {size!r:.80}")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise bad(f"{where}.sha256 must be 64 lower-case hex digits, got {digest!r:.80}")
        files.append(PackagedFile(name, size, digest))
    files_t = tuple(files)
    if topology_file not in {f.path for f in files_t}:
        raise bad(f"topology_file {topology_file!r} is not among the listed files")
    checksum = field("checksum", str, "a string")
    if checksum != content_checksum(files_t):
        raise bad("checksum does not match the listed files' digests (the manifest was altered)")
    return Manifest(version, field("storm_py_version", str, "a string"), topology_file, structure_data,
                    conf, files_t, checksum)


def load_manifest_file(path: str | os.PathLike) -> Manifest:
    """The manifest of an extracted package (dest_dir / MANIFEST_NAME), checked as when read."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise PackageError(f"manifest {p} cannot be read: {exc}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise PackageError(f"manifest {p} is larger than {MAX_MANIFEST_BYTES} bytes")
    return parse_manifest(raw, f"manifest {p}")


def damaged_files(code_dir: str | os.PathLike) -> list[str]:
    """What no longer matches the manifest in an extracted package: each file missing, of
    another size or content ('path: problem'); [] when all is as packaged."""
    d = Path(code_dir)
    try:
        manifest = load_manifest_file(d / MANIFEST_NAME)
    except PackageError as exc:
        return [str(exc)]
    problems = []
    for f in manifest.files:
        path = d / f.path
        try:
            if path.is_symlink() or not path.is_file():
                problems.append(f"{f.path}: missing")
                continue
            if path.stat().st_size != f.size:
                problems.append(f"{f.path}: {path.stat().st_size} bytes, packaged {f.size}")
                continue
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
        except OSError as exc:
            problems.append(f"{f.path}: unreadable ({exc.strerror or exc})")
            continue
        if h.hexdigest() != f.sha256:
            problems.append(f"{f.path}: content differs from the package")
    return problems


# ---- verifying and extracting ----
def _stream_entry(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, expected: PackagedFile,
                  used: int, max_bytes: int, sink: Any) -> int:
    """Decompress one entry into sink (or nowhere), counting the bytes really produced; returns
    them. Stops as soon as the entry passes its listed size or the package its budget."""
    h = hashlib.sha256()
    size = 0
    try:
        with zf.open(info) as f:
            while chunk := f.read(_CHUNK):
                size += len(chunk)
                if used + size > max_bytes:
                    raise _error(path, f"decompressed data passes {MAX_BYTES_KEY} ({max_bytes} bytes) "
                                       f"(a zip bomb, or declared sizes that lie)", info.filename)
                if size > expected.size:
                    raise _error(path, f"decompresses to more than the {expected.size} bytes listed",
                                 info.filename)
                h.update(chunk)
                if sink is not None:
                    sink.write(chunk)
    except PackageError:
        raise
    except _ZIP_ERRORS as exc:
        raise _error(path, f"cannot be decompressed (damaged, or its declared size is false): "
                           f"{type(exc).__name__}: {exc}", info.filename) from None
    if size != expected.size:
        raise _error(path, f"holds {size} bytes, the manifest lists {expected.size}", info.filename)
    if h.hexdigest() != expected.sha256:
        raise _error(path, "content does not match its sha256 in the manifest", info.filename)
    return size


def verify_package(zip_path: str | os.PathLike, *, max_bytes: int) -> Manifest:
    """read_manifest's checks plus every file decompressed (to nowhere) and checked against its
    digest: for a holder that keeps the zip (Nimbus) and wants it whole before accepting it."""
    path = Path(zip_path)
    with _open_zip(path) as zf:
        manifest, by_name, _raw = _read(path, zf, max_bytes)
        used = 0
        for f in manifest.files:
            used += _stream_entry(path, zf, by_name[f.path], f, used, max_bytes, None)
    return manifest


def _target(root: Path, name: str) -> Path:
    """The path an entry is written to, checked to lie inside root after resolving links."""
    target = root.joinpath(*name.split("/"))
    if not target.resolve().is_relative_to(root):
        raise PackageError(f"entry {name!r} resolves outside the extraction directory")
    return target


def extract_package(zip_path: str | os.PathLike, dest_dir: str | os.PathLike, *, max_bytes: int) -> Manifest:
    """Check, extract into a temp dir beside dest_dir (which must not exist), verify every file's
    size and digest, then rename the temp dir to dest_dir. On any failure dest_dir stays absent.
    dest_dir holds the listed files plus the manifest (storm-manifest.json)."""
    path = Path(zip_path)
    dest = Path(dest_dir).absolute()
    if dest.exists() or dest.is_symlink():
        raise FileExistsError(f"extraction directory {dest} already exists")
    parent = dest.parent.resolve()
    if not parent.is_dir():
        raise FileNotFoundError(f"extraction directory's parent {dest.parent} does not exist")
    with _open_zip(path) as zf:
        manifest, by_name, raw = _read(path, zf, max_bytes)
        root = Path(tempfile.mkdtemp(prefix=f".{dest.name}.extract-", dir=parent))
        done = False
        try:
            used = 0
            for f in manifest.files:
                target = _target(root, f.path)
                target.parent.mkdir(parents=True, exist_ok=True)
                _target(root, f.path)  # again, now that its directories exist
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
                try:
                    fd = os.open(target, flags, _FILE_MODE)
                except OSError as exc:
                    raise _error(path, f"cannot be written to {target}: {exc}", f.path) from None
                with os.fdopen(fd, "wb") as out:
                    used += _stream_entry(path, zf, by_name[f.path], f, used, max_bytes, out)
            # The manifest goes along (already parsed and checked): a worker compares the structure
            # it builds from the topology file with it (load_manifest_file).
            (root / MANIFEST_NAME).write_bytes(raw)
            os.chmod(root, 0o755)  # mkdtemp makes it 0700; the package is readable like any dir
            os.rename(root, parent / dest.name)
            done = True
        finally:
            if not done:
                shutil.rmtree(root, ignore_errors=True)
    log.info("extracted package %s into %s (%d files)", path, dest, len(manifest.files))
    return manifest
