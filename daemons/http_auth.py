"""Who may read the UI and the logviewer: with `nimbus.authentication.secret` set, every request
needs `Authorization: Bearer SECRET` or the session cookie of the app's login page; anything else
is a 401 (JSON for API paths, HTML with the login form for pages) and nothing else.

Two roles: `admin` (the cluster's secret: reads and actions) and `read-only` (`ui.readonly.secret`:
reads only). A session is `base64(role|expiry|nonce).hmac`, signed with a key derived from the
secrets and the app's name, so it cannot be forged, outlives neither its 12 hours nor a change of
either secret, and a UI session is no logviewer session. The decisions are pure functions;
`install` hooks them into a Flask app.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import html
import logging
import secrets as _random
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from flask import Flask, Response, g, redirect, request

from daemons.http_server import error_response
from executor.errors import ClearError

log = logging.getLogger(__name__)

ADMIN_KEY = "nimbus.authentication.secret"
READONLY_KEY = "ui.readonly.secret"
ADMIN, READ_ONLY = "admin", "read-only"
ROLES = (ADMIN, READ_ONLY)
SESSION_LIFETIME_SECS = 12 * 3600
WWW_AUTHENTICATE = 'Bearer realm="storm-py"'
ROLE_HEADER = "X-Storm-Py-Role"  # lets the pages know whether an action needs the admin secret
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OPEN_PATHS = frozenset({"/login", "/logout"})  # how a client gets (or drops) credentials


class AuthConfigError(ClearError):
    """The secrets in the conf cannot secure anything as given."""


class BadSession(Exception):
    """A session cookie that is not ours, was changed, or is too old (the message says which)."""


@dataclass(frozen=True)
class Secrets:
    admin: str
    readonly: str | None = None


@dataclass(frozen=True)
class Decision:
    role: str | None  # None: refused
    reason: str = ""  # why refused (for the log and the 401), "" when granted
    via: str = ""  # "bearer" or "session"


# ---------------------------------------------------------------------- pure decisions
def secrets_from_conf(conf: Mapping[str, Any]) -> Secrets | None:
    """The secrets of `conf`, None when the cluster has none (everything open, as without auth)."""
    admin, readonly = conf.get(ADMIN_KEY) or None, conf.get(READONLY_KEY) or None
    for key, value in ((ADMIN_KEY, admin), (READONLY_KEY, readonly)):
        if value is not None and not isinstance(value, str):
            raise AuthConfigError(f"{key} must be a string, got a {type(value).__name__}")
    if admin is None:
        if readonly is not None:
            raise AuthConfigError(f"{READONLY_KEY} is set but {ADMIN_KEY} is not: without the admin secret "
                                  f"the UI and logviewer are open to all, so a read-only secret means nothing")
        return None
    if readonly is not None and hmac.compare_digest(admin.encode("utf-8"), readonly.encode("utf-8")):
        raise AuthConfigError(f"{READONLY_KEY} must differ from {ADMIN_KEY} (the same value would be admin)")
    return Secrets(admin, readonly)


def role_of_secret(given: str, secrets: Secrets) -> str | None:
    """The role a presented secret gives, None for a wrong one."""
    raw = given.encode("utf-8")
    if hmac.compare_digest(raw, secrets.admin.encode("utf-8")):
        return ADMIN
    if secrets.readonly is not None and hmac.compare_digest(raw, secrets.readonly.encode("utf-8")):
        return READ_ONLY
    return None


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer TOKEN` (the scheme is case-insensitive), else None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def session_key(secrets: Secrets, app_name: str) -> bytes:
    """The signing key of `app_name`'s sessions: changing either secret ends every session."""
    context = b"\0".join([b"storm-py session", app_name.encode("utf-8"), (secrets.readonly or "").encode("utf-8")])
    return hmac.new(secrets.admin.encode("utf-8"), context, hashlib.sha256).digest()


def _signature(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode("ascii"), hashlib.sha256).hexdigest()


def sign_session(key: bytes, role: str, now: float, lifetime: float = SESSION_LIFETIME_SECS,
                 nonce: str | None = None) -> str:
    """A cookie value holding `role` until now + lifetime."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")
    payload = f"{role}|{int(now + lifetime)}|{nonce or _random.token_hex(8)}"
    body = base64.urlsafe_b64encode(payload.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{body}.{_signature(key, body)}"


def verify_session(key: bytes, value: str, now: float, lifetime: float = SESSION_LIFETIME_SECS) -> str:
    """The role of a session cookie value; BadSession naming what is wrong with it."""
    body, dot, sig = value.rpartition(".")
    if not dot or not body or not body.isascii():
        raise BadSession("not a session value")
    if not hmac.compare_digest(sig.encode("utf-8"), _signature(key, body).encode("ascii")):
        raise BadSession("bad signature (forged, changed, or signed with other secrets)")
    try:
        role, expiry, _nonce = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8").split("|")
        expiry_at = int(expiry)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadSession("signed but unreadable") from None
    if role not in ROLES:
        raise BadSession(f"unknown role {role!r}")
    if expiry_at <= now:
        raise BadSession("expired")
    if expiry_at > now + lifetime + 60:
        raise BadSession("expiry beyond the session lifetime")
    return role


def decide(secrets: Secrets, key: bytes, authorization: str | None, cookie: str | None, now: float) -> Decision:
    """Whether a request's credentials let it in, and as what. A presented Authorization header
    decides alone (a wrong one is not rescued by a cookie)."""
    if authorization:
        token = bearer_token(authorization)
        if token is None:
            return Decision(None, "the Authorization header is not 'Bearer <secret>'", "bearer")
        role = role_of_secret(token, secrets)
        return Decision(role, "" if role else "wrong bearer secret", "bearer")
    if cookie:
        try:
            return Decision(verify_session(key, cookie, now), "", "session")
        except BadSession as exc:
            return Decision(None, f"session cookie refused: {exc}", "session")
    return Decision(None, "no credentials")


def is_api_path(path: str) -> bool:
    """Whether `path` answers JSON/text to programs (a 401 in JSON) rather than pages (HTML)."""
    return path.startswith("/api/") or path == "/metrics"


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a local path only (no scheme, no host, no `//`), else `/`."""
    if not target or any(c in target for c in "\\\r\n\t\0"):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def printable(text: str | None) -> str:
    """`text` for one log line: a client's control characters (a forged line break) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def same_origin(origin: str | None, host: str) -> bool:
    """Whether a browser's Origin header (absent: not a cross-site browser request) names this host."""
    if origin is None:
        return True
    return urlsplit(origin).netloc.lower() == host.lower()


# ---------------------------------------------------------------------- the bodies
_STYLE = ("body{font:15px system-ui,sans-serif;background:#f4f6f8;color:#222;margin:0}"
          "main{max-width:26em;margin:12vh auto;background:#fff;padding:1.5em 2em;border-radius:8px;"
          "box-shadow:0 1px 4px #0002}h1{font-size:1.3em}label{display:block;margin:1em 0}"
          "input[type=password]{width:100%;padding:.4em;box-sizing:border-box}"
          "button{padding:.4em 1.2em}.why{color:#a40}code{background:#eee;padding:0 .2em}")


def login_page(title: str, message: str, next_path: str) -> str:
    """The login form (HTML), posting the secret to /login and coming back to `next_path`."""
    esc = html.escape
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>"
            f"<title>{esc(title)}: log in</title><style>{_STYLE}</style></head><body><main>"
            f"<h1>{esc(title)}</h1><p class=why id=why>{esc(message)}</p>"
            f"<form method=post action='/login' id=login><input type=hidden name=next value='{esc(next_path)}'>"
            f"<label>Secret (<code>{ADMIN_KEY}</code>, or <code>{READONLY_KEY}</code> to read only)"
            f"<input type=password name=secret id=secret autocomplete=current-password required autofocus></label>"
            f"<button type=submit id=login-submit>Log in</button></form>"
            f"<p>REST clients send the header <code>Authorization: Bearer &lt;secret&gt;</code> instead.</p>"
            f"</main></body></html>")


def _needs_credentials(what: str) -> str:
    return (f"{what} needs credentials: send the header 'Authorization: Bearer <{ADMIN_KEY}>' "
            f"(or <{READONLY_KEY}> to read only), or log in at /login")


def unauthorized(title: str, path: str, next_path: str, reason: str) -> Response:
    """The 401: Storm's JSON error for API paths, the login form for pages; nothing of the answer."""
    if is_api_path(path):
        answer = error_response(401, "auth", f"{reason}: {_needs_credentials(f'this {title}')}")
    else:
        message = f"This page needs credentials ({reason}): log in with the cluster's secret."
        answer = Response(login_page(title, message, next_path), status=401, mimetype="text/html")
    answer.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    return answer


# ---------------------------------------------------------------------- Flask
def current_role() -> str | None:
    """The role of the request being served (None when the app has no secret)."""
    return g.get("storm_py_role")


def install(app: Flask, conf: Mapping[str, Any], *, app_name: str, title: str) -> Secrets | None:
    """Guard every route of `app` with the conf's secrets and add /login and /logout; without a
    secret nothing is installed (the app stays open, as before)."""
    found = secrets_from_conf(conf)
    if found is None:
        return None
    key = session_key(found, app_name)
    cookie_name = f"storm-py-{app_name}-session"

    def _requested() -> str:
        return request.full_path.rstrip("?") if request.query_string else request.path

    @app.before_request
    def _guard():
        if request.path in OPEN_PATHS:
            return None
        decision = decide(found, key, request.headers.get("Authorization"), request.cookies.get(cookie_name),
                          time.time())
        if decision.role is None:
            log.warning("refused %s %s from %s: %s", request.method, printable(request.path), request.remote_addr,
                        decision.reason)
            return unauthorized(title, request.path, _requested(), decision.reason)
        # SameSite=Strict already keeps the cookie off cross-site requests; a foreign Origin is refused too.
        if (decision.via == "session" and request.method not in SAFE_METHODS
                and not same_origin(request.headers.get("Origin"), request.host)):
            log.warning("refused %s %s from %s: cross-origin request (Origin %s) with a session cookie",
                        request.method, printable(request.path), request.remote_addr,
                        printable(request.headers.get("Origin")))
            return error_response(403, "auth", f"{request.method} {request.path}: a session cookie works only "
                                               f"from this {title}'s own pages (Origin {request.headers.get('Origin')})")
        g.storm_py_role = decision.role
        return None

    @app.after_request
    def _headers(answer: Response):
        if answer.status_code == 401:
            answer.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
        role = g.get("storm_py_role")
        if role is not None:
            answer.headers[ROLE_HEADER] = role
        answer.headers.setdefault("Cache-Control", "no-store")  # nothing secured stays in a shared cache
        return answer

    @app.get("/login")
    def login_form():
        return Response(login_page(title, f"Log in to this {title}.", safe_next(request.args.get("next"))),
                        mimetype="text/html")

    @app.post("/login")
    def login():
        target = safe_next(request.form.get("next") or request.args.get("next"))
        given = request.form.get("secret") or request.form.get("password") or ""
        role = role_of_secret(given, found) if given else None
        if role is None:
            log.warning("refused a login to the %s from %s: %s", title, request.remote_addr,
                        "no secret given" if not given else "wrong secret")
            answer = Response(login_page(title, "Wrong secret." if given else "No secret given.", target),
                              status=401, mimetype="text/html")
            return answer
        log.info("%s login to the %s from %s", role, title, request.remote_addr)
        answer = redirect(target, 303)
        answer.set_cookie(cookie_name, sign_session(key, role, time.time()), max_age=SESSION_LIFETIME_SECS,
                          path="/", httponly=True, samesite="Strict", secure=request.is_secure)
        return answer

    @app.post("/logout")
    def logout():
        answer = redirect("/login", 303)
        answer.delete_cookie(cookie_name, path="/", httponly=True, samesite="Strict", secure=request.is_secure)
        return answer

    log.info("%s: reads need %s%s (bearer header or /login)", title, ADMIN_KEY,
             f" or {READONLY_KEY}" if found.readonly else "")
    return found
