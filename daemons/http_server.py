"""A WSGI app served by waitress inside a daemon's lifecycle (the UI and the logviewer).

Waitress is a pure-Python production WSGI server that can be embedded: it binds in
`create_server` (a taken port fails the start with one clear error), serves from its own thread
pool, and `close()` ends its loop.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Callable

import waitress
from flask import Response

from executor.errors import ClearError
from executor.lifecycle import Service

log = logging.getLogger(__name__)

_THREADS = 4
_STOP_JOIN_SECS = 5.0


class BindError(ClearError):
    """The daemon cannot listen on its address."""


def json_response(data: Any, status: int = 200) -> Response:
    """A JSON answer (`application/json`; NaN refused: JSON has none)."""
    return Response(json.dumps(data, allow_nan=False), status=status, mimetype="application/json")


def error_response(status: int, error: str, message: str) -> Response:
    """Storm's error body `{"error": SHORT, "errorMessage": LONGER}`."""
    return json_response({"error": error, "errorMessage": message}, status)


def display_host(host: str) -> str:
    """A host a browser on this machine can use for a listening address."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


class WsgiServer(Service):
    """Serves `app` on host:port (port 0: a free one, see `.port`) from start() to stop()."""

    def __init__(self, name: str, app: Callable[..., Any], host: str, port: int):
        super().__init__(name)
        self.app, self.host, self._want_port = app, host, int(port)
        self.port: int | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{display_host(self.host)}:{self.port}"

    def _on_start(self) -> None:
        try:
            self._server = waitress.create_server(self.app, host=self.host, port=self._want_port,
                                                  threads=_THREADS, ident=f"storm-py-{self.name}")
        except OSError as exc:
            raise BindError(f"{self.name} cannot listen on {self.host}:{self._want_port}: "
                            f"{exc.strerror or exc}") from None
        self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._serve, name=f"{self.name}-http", daemon=True)
        self._thread.start()
        self.on_stop(self._stop_server, "http server")

    def _serve(self) -> None:
        try:
            self._server.run()
        except Exception as exc:  # the loop ended on its own: nothing is served any more
            self.fatal(f"http server stopped: {exc}", exc)

    def _stop_server(self) -> None:
        self._server.close()
        self._server.task_dispatcher.shutdown(timeout=_STOP_JOIN_SECS)
        if self._thread is not None:
            self._thread.join(_STOP_JOIN_SECS)
