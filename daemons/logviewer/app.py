"""The logviewer's routes (Flask): a log page by offset and length, a download, a JSON page, the
list of a topology's worker logs. Every name goes through files.resolve (no `..`, no absolute
path, no link out of the log dir) and every read through files.read_page (bounded). With
`nimbus.authentication.secret` in the conf, every route needs credentials (daemons/http_auth.py)."""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlencode

from flask import Flask, Response, request, send_file, send_from_directory
from werkzeug.exceptions import HTTPException

from daemons import http_auth
from daemons.http_server import error_response, json_response
from daemons.logviewer import files

log = logging.getLogger(__name__)

# The web UI's stylesheet (daemons/ui/static/css, package data), served by the logviewer too.
UI_CSS = Path(__file__).resolve().parents[1] / "ui" / "static" / "css"
STYLESHEET = "/static/css/ui.css"


def _int_arg(name: str) -> int | None:
    value = request.args.get(name)
    if value is None or value == "":
        return None
    if not value.strip().isdigit():
        raise files.LogAccessError(f"parameter {name!r} must be a whole number >= 0, got {value!r}", 400)
    return int(value)


def make_app(log_dir: Path, conf: Mapping[str, Any] | None = None) -> Flask:
    """Worker logs by the names Storm's links use (relative to workers-artifacts); daemon logs
    (`/daemonlog`) directly under the log dir. `conf`: where the secrets are (none: open)."""
    app = Flask("storm-py-logviewer")
    http_auth.install(app, conf or {}, app_name="logviewer", title="storm-py logviewer")
    artifacts = files.worker_root(log_dir)

    @app.errorhandler(files.LogAccessError)
    def _refused(exc: files.LogAccessError):
        if exc.status == 403:
            log.warning("refused %s from %s: %s", request.full_path, request.remote_addr, exc)
        short = {400: "Bad request", 403: "Forbidden", 404: "Not found"}[exc.status]
        return error_response(exc.status, short, str(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        return error_response(exc.code or 500, exc.name, f"{request.path}: {exc.description}")

    def _page(daemon_logs: bool):
        name = request.args.get("file", "")
        if daemon_logs and "/" in name.replace("\\", "/"):
            raise files.LogAccessError(f"daemon log {name!r} refused: daemon logs are directly in the log dir", 403)
        path = files.resolve(log_dir if daemon_logs else artifacts, name)
        return name, files.read_page(path, _int_arg("start"), _int_arg("length"))

    def _html(name: str, page: files.Page, route: str) -> Response:
        def link(label: str, start: int | None) -> str:
            if start is None:
                return f"<span class=off>{label}</span>"
            query = urlencode({"file": name, "start": start, "length": page.length})
            return f'<a href="{route}?{query}">{label}</a>'
        last = max(0, page.size - page.length)
        nav = " | ".join([link("first", 0 if page.start else None), link("prev", page.prev_start),
                          link("next", page.next_start), link("last", last if page.next_start is not None else None),
                          f'<a href="/download?{urlencode({"file": name})}">download</a>'])
        text = html.escape(page.data.decode("utf-8", errors="replace"))
        title = html.escape(name)
        # The UI's own stylesheet (the same file, served here): `pre.log.page` wraps long lines.
        body = (f"<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>"
                f"<link rel=stylesheet href=\"{STYLESHEET}\"><title>{title}</title></head>"
                f"<body><header class=top><span class=brand>storm-py</span><span class=where>logviewer</span>"
                f"</header><main><h1>{title}</h1><p class=muted>bytes {page.start}-{page.start + len(page.data)} "
                f"of {page.size}</p><p class=lognav>{nav}</p><pre id=log class=\"log page\">{text}</pre>"
                f"<p class=lognav>{nav}</p></main></body></html>")
        return Response(body, mimetype="text/html")

    @app.get(STYLESHEET)
    def stylesheet():
        return send_from_directory(UI_CSS, "ui.css", mimetype="text/css", max_age=0)

    @app.get("/log")
    def log_page():
        name, page = _page(daemon_logs=False)
        return _html(name, page, "/log")

    @app.get("/daemonlog")
    def daemon_log_page():
        name, page = _page(daemon_logs=True)
        return _html(name, page, "/daemonlog")

    @app.get("/api/v1/log")
    def log_json():
        name, page = _page(daemon_logs=False)
        return json_response({"file": name, "start": page.start, "length": page.length, "size": page.size,
                      "data": page.data.decode("utf-8", errors="replace"),
                      "next": page.next_start, "prev": page.prev_start})

    @app.get("/download")
    def download():
        path = files.resolve(artifacts, request.args.get("file", ""))
        return send_file(path, mimetype="text/plain", as_attachment=True, download_name=path.name)

    @app.get("/api/v1/listLogs")
    def list_logs():
        port = _int_arg("port")
        return json_response(files.list_logs(artifacts, request.args.get("topologyId") or None, port))

    return app
