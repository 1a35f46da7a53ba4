"""The code package: build -> read -> extract round trip, determinism, exclusions, secrets, limits,
and `jar build` on a real topology directory."""

from __future__ import annotations

import os
import sys
import textwrap
import zipfile

import pytest
from click.testing import CliRunner

from daemons.cli_jar import jar
from executor.api import Bolt, Spout, TopologyBuilder
from executor.package import (
    MANIFEST_NAME,
    PackageError,
    build_package,
    content_checksum,
    entry_name_problem,
    extract_package,
    file_checksum,
    load_manifest_file,
    read_manifest,
    verify_package,
    without_secrets,
)
from executor.structure import TopologyStructure
from executor.topology_file import load_topology_file

pytestmark = pytest.mark.timeout(30)

LIMIT = 1024 * 1024
COMPONENTS_MODULE = "pkgtest_components"

COMPONENTS = textwrap.dedent('''
    """Components of the package test topology."""
    from executor.api import Bolt, Spout


    class WordSpout(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(["word"])

        def next_tuple(self):
            pass


    class ExclaimBolt(Bolt):
        def declare_output_fields(self, declarer):
            declarer.declare(["word"])

        def execute(self, tup):
            pass
''')

TOPOLOGY = textwrap.dedent(f'''
    from {COMPONENTS_MODULE} import ExclaimBolt, WordSpout

    from executor.api import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout("word", WordSpout(), 2)
    builder.set_bolt("exclaim1", ExclaimBolt(), 3).shuffle_grouping("word")
    builder.set_bolt("exclaim2", ExclaimBolt(), 2).fields_grouping("exclaim1", ["word"])
    topology = builder.create_topology()
    config = {{"topology.workers": 2, "nimbus.authentication.secret": "hunter2", "db.password": "pw"}}
''')


class S(Spout):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def next_tuple(self):
        pass


class B(Bolt):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, tup):
        pass


def _structure() -> dict:
    b = TopologyBuilder()
    b.set_spout("s", S(), 2)
    b.set_bolt("b", B(), 3).fields_grouping("s", ["word"]).add_configuration("topology.max.spout.pending", 7)
    return b.create_topology().structure.to_dict()


@pytest.fixture
def topo_dir(tmp_path):
    d = tmp_path / "src"
    (d / "lib").mkdir(parents=True)
    (d / "topology.py").write_text(TOPOLOGY)
    (d / f"{COMPONENTS_MODULE}.py").write_text(COMPONENTS)
    (d / "lib" / "data.txt").write_bytes(b"some data\n" * 100)
    (d / "README").write_text("hello")
    yield d
    # the loader put the directory on sys.path and imported the components module by name
    sys.modules.pop(COMPONENTS_MODULE, None)
    if str(d) in sys.path:
        sys.path.remove(str(d))


def _build(src, out, **kw):
    args = dict(structure=_structure(), conf={"topology.workers": 3}, max_bytes=LIMIT)
    args.update(kw)
    return build_package(src, "topology.py", out, **args)


def _tree(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_round_trip_gives_identical_files_and_structure(topo_dir, tmp_path):
    out = tmp_path / "pkg.zip"
    built = _build(topo_dir, out)
    read = read_manifest(out, max_bytes=LIMIT)
    assert read == built
    assert read.topology_file == "topology.py"
    assert read.structure() == TopologyStructure.from_dict(_structure())
    assert read.conf == {"topology.workers": 3}
    assert [f.path for f in read.files] == sorted(_tree(topo_dir))
    assert read.checksum == content_checksum(read.files)
    assert verify_package(out, max_bytes=LIMIT) == built
    dest = tmp_path / "extracted"
    assert extract_package(out, dest, max_bytes=LIMIT) == built
    extracted = _tree(dest)
    assert extracted.pop(MANIFEST_NAME)
    assert extracted == _tree(topo_dir)
    assert load_manifest_file(dest / MANIFEST_NAME) == built
    assert sorted(os.listdir(tmp_path)) == ["extracted", "pkg.zip", "src"]  # no temp dir left


def test_zip_layout_is_fixed(topo_dir, tmp_path):
    out = tmp_path / "pkg.zip"
    _build(topo_dir, out)
    with zipfile.ZipFile(out) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == sorted(_tree(topo_dir)) + [MANIFEST_NAME]
    for i in infos:
        assert i.date_time == (1980, 1, 1, 0, 0, 0)
        assert i.external_attr >> 16 == 0o100644


def test_build_is_deterministic(topo_dir, tmp_path):
    a, b = tmp_path / "a.zip", tmp_path / "b.zip"
    _build(topo_dir, a)
    for p in topo_dir.rglob("*"):  # other times and modes must not change the bytes
        os.utime(p, (1_000_000, 1_000_000))
        if p.is_file():
            p.chmod(0o755)
    _build(topo_dir, b)
    assert a.read_bytes() == b.read_bytes()
    assert file_checksum(a) == file_checksum(b)


def test_excluded_paths_are_left_out(topo_dir, tmp_path):
    for d in ["__pycache__", "lib/__pycache__", ".git", ".hg", ".svn", ".venv", "venv", ".pytest_cache",
              ".mypy_cache", ".ruff_cache", ".tox", "node_modules", "myenv", "lib/node_modules/x"]:
        (topo_dir / d).mkdir(parents=True, exist_ok=True)
        (topo_dir / d / "f.txt").write_text("x")
    (topo_dir / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (topo_dir / "myenv" / "bin").mkdir()
    (topo_dir / "myenv" / "bin" / "python").symlink_to(sys.executable)  # links inside a venv are fine
    (topo_dir / "lib" / "mod.pyc").write_bytes(b"\0")
    (topo_dir / "old.pyo").write_bytes(b"\0")
    (topo_dir / ".venv-link").mkdir()
    out = topo_dir / "pkg.zip"  # the output inside the directory is never packaged
    out.write_bytes(b"an older build")
    m = _build(topo_dir, out)
    assert [f.path for f in m.files] == ["README", "lib/data.txt", f"{COMPONENTS_MODULE}.py", "topology.py"]
    # building again over the previous output gives the same package
    first = out.read_bytes()
    _build(topo_dir, out)
    assert out.read_bytes() == first
    assert sorted(p.name for p in topo_dir.iterdir() if p.name.startswith(".pkg.zip")) == []


def test_venv_symlink_by_name_is_skipped(topo_dir, tmp_path):
    (tmp_path / "shared-venv").mkdir()
    (topo_dir / ".venv").symlink_to(tmp_path / "shared-venv")
    m = _build(topo_dir, tmp_path / "pkg.zip")
    assert ".venv" not in {f.path.split("/")[0] for f in m.files}


@pytest.mark.parametrize("key", ["nimbus.authentication.secret", "storm.zookeeper.auth.payload",
                                 "storm.zookeeper.topology.auth.payload", "my.api.secret", "db.password",
                                 "DB.Password"])
def test_without_secrets_removes_secret_keys(key):
    conf = {key: "s3cr3t", "topology.workers": 2, "secretary.name": "kept", "password.hint": "kept"}
    assert without_secrets(conf) == {"topology.workers": 2, "secretary.name": "kept", "password.hint": "kept"}
    assert key in conf  # the input is not changed


def test_secrets_never_reach_the_package(topo_dir, tmp_path):
    conf = {"topology.workers": 2, "nimbus.authentication.secret": "hunter2", "x.password": "pw",
            "storm.zookeeper.topology.auth.payload": "u:p"}
    out = tmp_path / "pkg.zip"
    m = _build(topo_dir, out, conf=conf)
    assert m.conf == {"topology.workers": 2}
    raw = out.read_bytes()
    with zipfile.ZipFile(out) as zf:
        manifest_text = zf.read(MANIFEST_NAME)
    for secret in (b"hunter2", b"u:p"):
        assert secret not in raw and secret not in manifest_text


def test_symlink_in_directory_is_refused(topo_dir, tmp_path):
    (topo_dir / "lib" / "passwd").symlink_to("/etc/passwd")
    out = tmp_path / "pkg.zip"
    with pytest.raises(PackageError, match=r"lib/passwd.*symbolic link"):
        _build(topo_dir, out)
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_size_over_the_limit_is_refused(topo_dir, tmp_path):
    out = tmp_path / "pkg.zip"
    total = sum(len(b) for b in _tree(topo_dir).values())
    with pytest.raises(PackageError) as exc:
        _build(topo_dir, out, max_bytes=total - 1)
    msg = str(exc.value)
    assert str(total) in msg and str(total - 1) in msg and "storm.package.max.bytes" in msg
    assert not out.exists()


def test_reserved_manifest_name_and_bad_topology_file_name(topo_dir, tmp_path):
    with pytest.raises(PackageError, match="nope.py"):
        build_package(topo_dir, "nope.py", tmp_path / "p.zip", structure=_structure(), conf={}, max_bytes=LIMIT)
    with pytest.raises(PackageError, match="must be a file name at the package root"):
        build_package(topo_dir, "lib/data.txt", tmp_path / "p.zip", structure=_structure(), conf={},
                      max_bytes=LIMIT)
    (topo_dir / MANIFEST_NAME).write_text("{}")
    with pytest.raises(PackageError, match="reserved"):
        _build(topo_dir, tmp_path / "p.zip")


def test_extract_refuses_an_existing_destination(topo_dir, tmp_path):
    out = tmp_path / "pkg.zip"
    _build(topo_dir, out)
    (tmp_path / "dest").mkdir()
    with pytest.raises(FileExistsError, match="dest"):
        extract_package(out, tmp_path / "dest", max_bytes=LIMIT)
    assert os.listdir(tmp_path / "dest") == []


@pytest.mark.parametrize("name, ok", [
    ("a.py", True), ("a/b/c.py", True), ("..a", True), ("a..b/c", True),
    ("", False), ("/abs", False), ("../x", False), ("a/../../x", False), ("a/..", False),
    ("a\\b", False), ("C:/x", False), ("c:x", False), ("a//b", False), ("./a", False), ("a/./b", False),
    ("dir/", False), ("a\0b", False), ("a\nb", False),
])
def test_entry_name_problem(name, ok):
    assert (entry_name_problem(name) is None) == ok


def test_jar_build_manifest_structure_equals_the_live_topology(topo_dir, tmp_path):
    out = tmp_path / "out" / "pkg.zip"
    result = CliRunner().invoke(jar, ["build", str(topo_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    m = read_manifest(out, max_bytes=LIMIT)
    assert (f"built package {out} ({len(m.files)} files, {out.stat().st_size} bytes, "
            f"checksum {file_checksum(out)})") in result.output
    live = load_topology_file(topo_dir / "topology.py").topology
    assert m.structure() == live.structure
    assert m.conf == {"topology.workers": 2}  # the file's config, secrets removed
    assert "__pycache__" not in {f.path.split("/")[0] for f in m.files}  # the import wrote one


def test_jar_build_with_another_file_name(topo_dir, tmp_path):
    (topo_dir / "topology.py").rename(topo_dir / "main.py")
    out = tmp_path / "pkg.zip"
    result = CliRunner().invoke(jar, ["build", str(topo_dir), "--file", "main.py", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert read_manifest(out, max_bytes=LIMIT).topology_file == "main.py"


def test_jar_build_failures_name_the_culprit(topo_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "pkg.zip"
    r = runner.invoke(jar, ["build", str(topo_dir), "--file", "missing.py", "-o", str(out)])
    assert r.exit_code != 0 and "missing.py" in r.output
    r = runner.invoke(jar, ["build", str(topo_dir), "-o", str(out), "-c", "storm.package.max.bytes=100"])
    assert r.exit_code != 0 and "storm.package.max.bytes" in r.output
    (topo_dir / "link").symlink_to(topo_dir / "README")
    r = runner.invoke(jar, ["build", str(topo_dir), "-o", str(out)])
    assert r.exit_code != 0 and "link" in r.output and "symbolic link" in r.output
    assert not out.exists()
    assert not isinstance(r.exception, PackageError)  # a ClickException, not a traceback


@pytest.mark.parametrize("key", ["storm.zookeeper.port", "storm.zookeeper.root", "nimbus.seeds",
                                 "supervisor.slots.ports", "storm.local.dir", "storm.log.dir",
                                 "storm.local.hostname", "ui.port", "logviewer.port"])
def test_daemon_keys(key):
    from executor.package import is_daemon_key, without_daemon_keys

    assert is_daemon_key(key)
    assert without_daemon_keys({key: 1, "topology.workers": 2, "wordcount.table": "t"}) == {
        "topology.workers": 2, "wordcount.table": "t"}


@pytest.mark.parametrize("key", ["topology.workers", "storm.id", "worker.heartbeat.frequency.secs",
                                 "wordcount.table", "sink.retention.secs", "storm.messaging.x"])
def test_topology_keys_are_not_daemon_keys(key):
    from executor.package import is_daemon_key

    assert not is_daemon_key(key)


def test_daemon_keys_note_names_the_keys_and_where_they_belong():
    from executor.package import daemon_keys_note

    assert daemon_keys_note([], "-c") is None
    note = daemon_keys_note(["supervisor.slots.ports", "storm.zookeeper.port"], "-c")
    assert note.startswith("-c: storm.zookeeper.port, supervisor.slots.ports apply to the daemons")
    assert "supervisor's own storm.yaml" in note


def test_a_worker_takes_daemon_keys_from_its_supervisor(tmp_path):
    import json

    from executor.worker_process import topology_conf

    (tmp_path / "stormconf.json").write_text(json.dumps(
        {"storm.zookeeper.port": 1, "storm.local.dir": "/nimbus-dir", "topology.workers": 3}))
    conf = topology_conf({"storm.zookeeper.port": 2181, "storm.local.dir": "/sup-dir", "topology.workers": 1},
                         tmp_path)
    assert conf == {"storm.zookeeper.port": 2181, "storm.local.dir": "/sup-dir", "topology.workers": 3}


def test_damaged_files_names_what_differs_from_the_package(topo_dir, tmp_path):
    from executor.package import damaged_files, extract_package

    pkg = tmp_path / "p.zip"
    CliRunner().invoke(jar, ["build", str(topo_dir), "-o", str(pkg)], catch_exceptions=False)
    dest = tmp_path / "x"
    extract_package(pkg, dest, max_bytes=1 << 20)
    assert damaged_files(dest) == []
    (dest / "topology.py").write_text("changed")
    (dest / "README").unlink()
    (dest / "lib" / "data.txt").write_bytes(b"some data\n" * 99 + b"some dat4\n")
    assert sorted(damaged_files(dest)) == ["README: missing", "lib/data.txt: content differs from the package",
                                           f"topology.py: 7 bytes, packaged {len(TOPOLOGY.encode())}"]
