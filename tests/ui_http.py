"""Talking to `storm-py ui` over HTTP as a REST client would (urllib: no extra dependency)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT_SECS = 30.0


def request(base: str, method: str, path: str, body: Any = None, token: str | None = None,
            **params: Any) -> tuple[int, Any, str]:
    """(status, parsed JSON or text, content type) of one request to `base` + `path`."""
    url = base.rstrip("/") + path + (("?" + urllib.parse.urlencode(params)) if params else "")
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_SECS) as reply:
            status, ctype, raw = reply.status, reply.headers.get("Content-Type", ""), reply.read()
    except urllib.error.HTTPError as exc:
        status, ctype, raw = exc.code, exc.headers.get("Content-Type", ""), exc.read()
    text = raw.decode("utf-8")
    return status, (json.loads(text) if ctype.startswith("application/json") else text), ctype


def get(base: str, path: str, **params: Any) -> Any:
    """The JSON of a GET that must answer 200."""
    status, body, ctype = request(base, "GET", path, **params)
    assert status == 200, f"GET {path} {params}: {status} {body}"
    assert ctype.startswith("application/json"), f"GET {path}: content type {ctype}"
    return body


def post(base: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    status, answer, _ctype = request(base, "POST", path, body=body, token=token)
    return status, answer


def raw(url: str, method: str = "GET", headers: dict | None = None, data: bytes | None = None):
    """(status, headers, body text) without following redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as reply:
            return reply.status, reply.headers, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()
