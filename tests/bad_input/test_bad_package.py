"""Malicious or damaged code packages: each is refused with a PackageError naming the package and
the entry, and extraction writes nothing anywhere (not even beside the destination)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import zipfile

import pytest

from executor import package
from executor.api import Bolt, Spout, TopologyBuilder
from executor.package import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    Manifest,
    PackagedFile,
    PackageError,
    content_checksum,
    extract_package,
    read_manifest,
    verify_package,
)

pytestmark = pytest.mark.timeout(30)

LIMIT = 64 * 1024
FILES = {"topology.py": b"topology = None\n", "lib/c.py": b"X = 1\n"}


class S(Spout):
    def declare_output_fields(self, d):
        d.declare(["w"])

    def next_tuple(self):
        pass


class B(Bolt):
    def execute(self, tup):
        pass


def _structure() -> dict:
    b = TopologyBuilder()
    b.set_spout("s", S())
    b.set_bolt("b", B()).shuffle_grouping("s")
    return b.create_topology().structure.to_dict()


def _manifest(files: dict[str, bytes], **override) -> bytes:
    listed = tuple(PackagedFile(n, len(b), hashlib.sha256(b).hexdigest()) for n, b in sorted(files.items()))
    m = Manifest(FORMAT_VERSION, "test", "topology.py", _structure(), {}, listed, content_checksum(listed))
    d = m.to_dict()
    d.update(override)
    return json.dumps(d).encode()


def _zip(path, entries) -> None:
    """entries: (name or ZipInfo, bytes) in the order written; duplicates allowed."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            if isinstance(name, zipfile.ZipInfo):
                name.compress_type = zipfile.ZIP_DEFLATED
            with pytest.warns(UserWarning) if _dup(zf, name) else _nothing():
                zf.writestr(name, data)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _dup(zf, name) -> bool:
    n = name.filename if isinstance(name, zipfile.ZipInfo) else name
    return n in zf.namelist()


def _package(path, files=FILES, extra=(), manifest=None) -> None:
    """A package holding `files` (listed in the manifest) plus unlisted `extra` entries."""
    entries = list(files.items()) + list(extra)
    entries.append((MANIFEST_NAME, _manifest(files) if manifest is None else manifest))
    _zip(path, entries)


def _typed(name, kind) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (kind | 0o777) << 16
    return info


def _patch_declared_size(path, name, size) -> None:
    """Make the local header and the central directory both lie about an entry's size."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        local = zf.getinfo(name).header_offset
    struct.pack_into("<I", data, local + 22, size)
    pos = data.find(b"PK\x01\x02")
    while pos != -1:
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46:pos + 46 + name_len] == name.encode():
            struct.pack_into("<I", data, pos + 24, size)
        pos = data.find(b"PK\x01\x02", pos + 4)
    path.write_bytes(bytes(data))


# Each case writes a package to `path` (tmp_path is the area that must stay unchanged) and
# returns (the entry the error must name or None, whether read_manifest alone refuses it).
def case_absolute(path, tmp):
    name = f"{tmp}/escaped-abs"
    _package(path, extra=[(name, b"evil")])
    return name, True


def case_dotdot(path, tmp):
    _package(path, extra=[("../escaped", b"evil")])
    return "../escaped", True


def case_nested_dotdot(path, tmp):
    _package(path, extra=[("a/../../escaped", b"evil")])
    return "a/../../escaped", True


def case_backslash(path, tmp):
    _package(path, extra=[("a\\..\\..\\escaped", b"evil")])
    return "a\\..\\..\\escaped", True


def case_drive_letter(path, tmp):
    _package(path, extra=[("C:/escaped", b"evil")])
    return "C:/escaped", True


def case_symlink_entry(path, tmp):
    files = dict(FILES, link=b"/etc/passwd")
    _zip(path, [("topology.py", FILES["topology.py"]), ("lib/c.py", FILES["lib/c.py"]),
                (_typed("link", stat.S_IFLNK), b"/etc/passwd"), (MANIFEST_NAME, _manifest(files))])
    return "link", True


def case_device_entry(path, tmp):
    _package(path, extra=[(_typed("dev", stat.S_IFCHR), b"")])
    return "dev", True


def case_directory_entry(path, tmp):
    _package(path, extra=[("lib/", b"")])
    return "lib/", True


def case_file_and_directory(path, tmp):
    files = dict(FILES, lib=b"a file where a directory is")
    _package(path, files=files)
    return "lib", True


def case_duplicate(path, tmp):
    _package(path, extra=[("topology.py", b"something else\n")])
    return "topology.py", True


def case_declared_size_over_limit(path, tmp):
    files = dict(FILES, big=b"\0" * (2 * LIMIT))
    _package(path, files=files)
    return "big", True


def case_zip_bomb_lying_sizes(path, tmp):
    # 8x the limit of zeros compresses to a few KB; zip and manifest both claim 10 bytes
    bomb = b"\0" * (8 * LIMIT)
    files = dict(FILES, bomb=bomb[:10])
    _zip(path, list(FILES.items()) + [("bomb", bomb), (MANIFEST_NAME, _manifest(files))])
    _patch_declared_size(path, "bomb", 10)
    return "bomb", False


def case_missing_manifest(path, tmp):
    _zip(path, list(FILES.items()))
    return MANIFEST_NAME, True


def case_manifest_not_json(path, tmp):
    _package(path, manifest=b"{not json")
    return MANIFEST_NAME, True


def case_manifest_newer_format(path, tmp):
    _package(path, manifest=_manifest(FILES, format_version=FORMAT_VERSION + 1))
    return MANIFEST_NAME, True


def case_manifest_bad_structure(path, tmp):
    bad = {"version": 1, "components": {"s": {"kind": 5}}}
    _package(path, manifest=_manifest(FILES, structure=bad))
    return MANIFEST_NAME, True


def case_manifest_checksum_altered(path, tmp):
    _package(path, manifest=_manifest(FILES, checksum="0" * 64))
    return MANIFEST_NAME, True


def case_listed_file_absent(path, tmp):
    _zip(path, [("topology.py", FILES["topology.py"]), (MANIFEST_NAME, _manifest(FILES))])
    return "lib/c.py", True


def case_unlisted_file(path, tmp):
    _package(path, extra=[("extra.py", b"import os\n")])
    return "extra.py", True


def case_digest_mismatch(path, tmp):
    _zip(path, [("topology.py", FILES["topology.py"]), ("lib/c.py", b"Y = 2\n"),
                (MANIFEST_NAME, _manifest(FILES))])
    return "lib/c.py", False


def case_truncated_zip(path, tmp):
    _package(path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return None, True


def case_not_a_zip(path, tmp):
    path.write_text("print('hello')\n")
    return None, True


CASES = [v for k, v in sorted(globals().items()) if k.startswith("case_")]


def _snapshot(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files}


@pytest.mark.parametrize("case", CASES, ids=[c.__name__[5:] for c in CASES])
def test_bad_package_is_refused_and_nothing_is_written(case, tmp_path):
    pkg = tmp_path / "zips" / "pkg.zip"
    pkg.parent.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    entry, read_refuses = case(pkg, tmp_path)
    before = _snapshot(tmp_path)

    def check(exc: PackageError) -> None:
        msg = str(exc)
        assert str(pkg) in msg, msg
        if entry is not None:
            assert repr(entry) in msg, msg

    if read_refuses:
        with pytest.raises(PackageError) as exc:
            read_manifest(pkg, max_bytes=LIMIT)
        check(exc.value)
    else:
        read_manifest(pkg, max_bytes=LIMIT)  # only decompressing the files shows the problem
    with pytest.raises(PackageError) as exc:
        verify_package(pkg, max_bytes=LIMIT)
    check(exc.value)
    with pytest.raises(PackageError) as exc:
        extract_package(pkg, work / "dest", max_bytes=LIMIT)
    check(exc.value)
    assert _snapshot(tmp_path) == before
    assert not (work / "dest").exists()


def test_too_many_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(package, "MAX_ENTRIES", 3)
    pkg = tmp_path / "pkg.zip"
    files = {f"f{i}": b"x" for i in range(5)} | {"topology.py": b""}
    _package(pkg, files=files)
    with pytest.raises(PackageError, match=r"6 entries|more than 3"):
        read_manifest(pkg, max_bytes=LIMIT)


def test_decompressed_bytes_are_counted_not_declared(tmp_path):
    """Whatever the zip reader returns is counted against the limit as it streams, so even a
    reader that trusted lying headers would stop at max_bytes."""

    class Endless:
        def open(self, info):
            return io.BytesIO(b"\0" * (10 * LIMIT))

    info = zipfile.ZipInfo("bomb")
    expected = PackagedFile("bomb", 10 * LIMIT, "0" * 64)
    sink = io.BytesIO()
    with pytest.raises(PackageError, match=r"'bomb'.*storm.package.max.bytes"):
        package._stream_entry(tmp_path / "pkg.zip", Endless(), info, expected, 0, LIMIT, sink)
    assert len(sink.getvalue()) <= LIMIT
