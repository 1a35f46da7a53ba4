"""The logviewer over real HTTP (waitress on loopback): pages a worker log by offset and length,
downloads it, lists a topology's logs, and refuses every way out of the log dir (`..`, absolute
paths, a link pointing out, `%2e%2e`, NUL) with a 403 naming the name, without reading it; a
1 GB log is paged, never loaded."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from ui_http import request

from daemons.logviewer import files
from daemons.logviewer.daemon import Logviewer
from daemons.ui.app import STATIC

pytestmark = pytest.mark.timeout(60)

WORKER_LOG = "wc-1-1000/6700/worker.log"


@pytest.fixture
def logviewer(tmp_path):
    logs = tmp_path / "logs"
    worker = logs / "workers-artifacts" / "wc-1-1000" / "6700"
    worker.mkdir(parents=True)
    (worker / "worker.log").write_text("".join(f"line {i}\n" for i in range(10000)))
    (logs / "workers-artifacts" / "other-2-2000" / "6701").mkdir(parents=True)
    (logs / "workers-artifacts" / "other-2-2000" / "6701" / "worker.log").write_text("other\n")
    (logs / "nimbus.log").write_text("nimbus started\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    (worker / "escape.log").symlink_to(tmp_path / "secret.txt")
    server = Logviewer({"storm.local.dir": str(tmp_path), "storm.log.dir": str(logs)}, host="127.0.0.1", port=0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_page_by_offset_and_length_and_the_tail_by_default(logviewer):
    status, body, ctype = request(logviewer.url, "GET", "/api/v1/log", file=WORKER_LOG, start=0, length=14)
    assert status == 200 and body["data"] == "line 0\nline 1\n" and body["next"] == 14 and body["prev"] is None
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file=WORKER_LOG)
    assert body["data"].endswith("line 9999\n") and body["next"] is None and body["length"] == files.DEFAULT_PAGE_BYTES
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file=WORKER_LOG, start=0, length=10**9)
    assert len(body["data"]) == min(body["size"], files.MAX_PAGE_BYTES)  # one request reads a bounded amount
    status, page, ctype = request(logviewer.url, "GET", "/log", file=WORKER_LOG, start=7, length=7)
    assert status == 200 and ctype.startswith("text/html") and '<pre id=log class="log page">line 1\n</pre>' in page


def test_the_page_has_the_ui_s_stylesheet_and_wraps_long_lines(logviewer, tmp_path):
    long_line = "x" * 5000 + " " + "y" * 3000
    (tmp_path / "logs" / "daemon.log").write_text(f"short\n{long_line}\n")
    status, page, _ = request(logviewer.url, "GET", "/daemonlog", file="daemon.log")
    assert status == 200 and long_line in page  # the whole line, escaped as it is
    links = re.findall(r'<link rel=stylesheet href="([^"]+)">', page)
    assert links == ["/static/css/ui.css"] and '<header class=top>' in page and "<main>" in page
    status, css, ctype = request(logviewer.url, "GET", links[0])
    assert status == 200 and ctype.startswith("text/css")
    assert css == (STATIC / "css" / "ui.css").read_text()  # the UI's own (vendored) stylesheet
    rules = {sel.strip(): body for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css))}
    log_rules = rules["pre.log"] + rules["pre.log.page"]
    # Nothing cut: lines wrap (at spaces, and within a word too long for the page), and the
    # page's <pre> has no height limit of its own (the whole page of the log shows).
    assert "white-space: pre-wrap" in log_rules and "overflow-wrap: anywhere" in rules["pre.log.page"]
    assert "max-height: none" in rules["pre.log.page"]


def test_download_and_list_and_daemon_logs(logviewer):
    with urllib.request.urlopen(f"{logviewer.url}/download?file=wc-1-1000%2F6700%2Fworker.log", timeout=10) as r:
        assert r.headers["Content-Disposition"].startswith("attachment") and r.read().endswith(b"line 9999\n")
    status, names, _ = request(logviewer.url, "GET", "/api/v1/listLogs", topologyId="wc-1-1000")
    assert names == [WORKER_LOG]
    status, names, _ = request(logviewer.url, "GET", "/api/v1/listLogs")
    assert len(names) == 2
    status, page, _ = request(logviewer.url, "GET", "/daemonlog", file="nimbus.log")
    assert status == 200 and "nimbus started" in page


@pytest.mark.parametrize("name, why", [
    ("../../secret.txt", "'..'"),
    ("wc-1-1000/../../../secret.txt", "'..'"),
    ("/etc/passwd", "absolute"),
    ("wc-1-1000/6700/escape.log", "outside the log dir"),
    ("wc\x00.log", "absolute"),
])
def test_every_way_out_of_the_log_dir_is_refused(logviewer, tmp_path, name, why):
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file=name)
    assert status == 403 and body["error"] == "Forbidden" and why in body["errorMessage"], body
    assert "secret" not in body.get("data", "") and "top secret" not in str(body)


def test_an_encoded_dot_dot_is_refused_too(logviewer):
    for path in ("/log?file=%2e%2e%2f%2e%2e%2fsecret.txt", "/download?file=%2E%2E/%2E%2E/secret.txt",
                 "/api/v1/log?file=wc-1-1000%2F%2e%2e%2F%2e%2e%2F%2e%2e%2Fsecret.txt",
                 "/daemonlog?file=%2e%2e%2fsecret.txt"):
        try:
            with urllib.request.urlopen(logviewer.url + path, timeout=10) as r:
                raise AssertionError(f"{path} answered {r.status}: {r.read()[:80]!r}")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403 and b"top secret" not in exc.read()


def test_missing_files_and_bad_parameters(logviewer):
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file="wc-1-1000/6799/worker.log")
    assert status == 404 and "wc-1-1000/6799/worker.log" in body["errorMessage"]
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file=WORKER_LOG, start="-5")
    assert status == 400 and "start" in body["errorMessage"]
    status, body, _ = request(logviewer.url, "GET", "/daemonlog", file=WORKER_LOG)
    assert status == 403


def test_a_huge_log_is_paged_not_loaded(logviewer):
    big = logviewer.root / "workers-artifacts" / "wc-1-1000" / "6700" / "worker.log.1"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GB of size, no disk
        f.seek((1 << 30) - 6)
        f.write(b"tail!\n")
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file="wc-1-1000/6700/worker.log.1")
    assert status == 200 and body["size"] == 1 << 30 and body["data"].endswith("tail!\n")
    assert body["start"] == (1 << 30) - files.DEFAULT_PAGE_BYTES
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file="wc-1-1000/6700/worker.log.1",
                              start=0, length=1 << 30)
    assert status == 200 and len(body["data"]) == files.MAX_PAGE_BYTES and body["next"] == files.MAX_PAGE_BYTES
