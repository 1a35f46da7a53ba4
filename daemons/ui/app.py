"""The UI's HTTP routes (Flask): the web pages at / (static files that read the REST API),
Storm's REST API under /api/v1 and Prometheus /metrics.

Each route asks Nimbus (through `NimbusCalls`), reads the answer as daemons/answers/ types it and
shapes it with daemons/reports/views.py.
Errors are Storm's body `{"error": SHORT, "errorMessage": LONGER}`: an unknown topology or
component 404, a bad parameter 400, a POST by read-only credentials 403, Nimbus unreachable 503
naming its address, anything else 500. With `nimbus.authentication.secret` set, every route needs
credentials (daemons/http_auth.py: a 401 without).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Mapping

from flask import Flask, Response, request, send_from_directory
from werkzeug.exceptions import HTTPException

from daemons import http_auth
from daemons.answers.cluster import ClusterInfo
from daemons.answers.details import TopologyDetails
from daemons.http_server import error_response, json_response
from daemons.https_server import served_port
from daemons.reports import views
from daemons.rpc.calls import NimbusCalls
from daemons.rpc.protocol import AuthError, BadRequestError, IllegalStateError, RpcError, UnreachableError
from daemons.ui import metrics
from executor.errors import AlreadyAliveError, InvalidTopologyError, NotAliveError
from executor.stats_windows import ALL_TIME, WINDOW_NAMES

log = logging.getLogger(__name__)

API = "/api/v1"


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str):
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


def _remote_error(exc: Exception) -> ApiError:
    if isinstance(exc, NotAliveError):
        return ApiError(404, "Topology not found", str(exc))
    if isinstance(exc, AuthError):
        return ApiError(403, "auth", f"Nimbus refused the call: {exc}")
    if isinstance(exc, (BadRequestError, InvalidTopologyError, IllegalStateError, AlreadyAliveError)):
        return ApiError(400, "Bad request", str(exc))
    if isinstance(exc, UnreachableError):
        return ApiError(503, "Nimbus unavailable", str(exc))
    return ApiError(500, "Nimbus error", str(exc))


STATIC = Path(__file__).with_name("static")
PAGES = ("index.html", "topology.html", "component.html", "supervisor.html")


def make_app(nimbus: NimbusCalls, conf: Mapping[str, Any], nimbus_host: str, nimbus_port: int) -> Flask:
    app = Flask("storm-py-ui", static_folder=str(STATIC), static_url_path="/static")
    # The pages poll the API; a browser must not keep yesterday's script after an upgrade.
    app.config["SEND_FILE_MAX_AGE_DEFAULT"] = 0
    secured = http_auth.install(app, conf, app_name="ui", title="storm-py UI") is not None
    logviewer_port, logviewer_https = served_port(conf, "logviewer")

    def call(op: str, **args: Any) -> Any:
        try:
            return nimbus.call(op, **args)
        except (RpcError, NotAliveError, AlreadyAliveError, InvalidTopologyError) as exc:
            raise _remote_error(exc) from None

    def cluster_info() -> ClusterInfo:
        return ClusterInfo.from_wire(call("cluster_info"))

    def details_of(storm_id: str) -> TopologyDetails:
        return TopologyDetails.from_wire(call("topology_details", name=storm_id))

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError):
        if exc.status >= 500:
            log.warning("%s %s: %s", request.method, request.path, exc.message)
        return error_response(exc.status, exc.error, exc.message)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        return error_response(exc.code or 500, exc.name, f"{request.method} {request.path}: {exc.description}")

    @app.errorhandler(Exception)
    def _internal(exc: Exception):
        log.error("%s %s failed", request.method, request.path, exc_info=exc)
        return error_response(500, "Internal error", f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ the web pages
    @app.get("/")
    @app.get("/<page>")
    def page(page: str = "index.html"):
        if page not in PAGES:
            raise ApiError(404, "Not found", f"no page {page!r}; the pages are {', '.join(PAGES)}")
        return send_from_directory(STATIC, page, mimetype="text/html")

    # ------------------------------------------------------------------ the API's index
    @app.get(API)
    @app.get(f"{API}/")
    def api_index():
        """What the pages' footer links to: every REST route of this daemon (no Nimbus call)."""
        routes = sorted({(method, rule.rule) for rule in app.url_map.iter_rules()
                         if rule.rule.startswith(f"{API}/") and rule.rule != f"{API}/"
                         for method in rule.methods or () if method in ("GET", "POST")},
                        key=lambda r: (r[1], r[0]))
        return json_response({
            "api": API, "docs": "docs/ui.md, section 'REST API' (Apache Storm's paths and JSON shapes)",
            "endpoints": [{"method": m, "path": p.replace("<", "{").replace(">", "}")} for m, p in routes],
            "metrics": "/metrics"})

    # ------------------------------------------------------------------ cluster
    @app.get(f"{API}/cluster/configuration")
    def cluster_configuration():
        return json_response(call("nimbus_conf"))

    @app.get(f"{API}/cluster/summary")
    def cluster_summary():
        return json_response(views.cluster_summary(cluster_info()))

    @app.get(f"{API}/nimbus/summary")
    def nimbus_summary():
        return json_response(views.nimbus_summary(cluster_info(), nimbus_host, nimbus_port, logviewer_port,
                                                  logviewer_https))

    @app.get(f"{API}/supervisor/summary")
    def supervisor_summary():
        return json_response(views.supervisor_summary(cluster_info()))

    @app.get(f"{API}/supervisor")
    def supervisor_detail():
        sup_id, host = request.args.get("id"), request.args.get("host")
        if sup_id is None and host is None:
            raise ApiError(400, "Bad request", "parameter 'id' (or 'host') is required")
        info = cluster_info()
        found = views.find_supervisors(info, sup_id, host)
        if not found:
            what = f"id {sup_id!r}" if sup_id is not None else f"host {host!r}"
            raise ApiError(404, "Supervisor not found", f"no live supervisor with {what}")
        sup = found[0]
        details = [_details(t.id) for t in info.topologies if any(n == sup.id for n, _p in t.slots)]
        return json_response(views.supervisor_detail(sup, [d for d in details if d is not None]))

    def _details(storm_id: str) -> TopologyDetails | None:
        try:
            return details_of(storm_id)
        except ApiError as exc:
            if exc.status == 404:
                return None  # killed meanwhile
            raise

    # ------------------------------------------------------------------ topologies
    @app.get(f"{API}/topology/summary")
    def topology_summary():
        return json_response(views.topology_summary(cluster_info()))

    @app.get(f"{API}/topology/<storm_id>")
    def topology_detail(storm_id: str):
        window, include_sys = _window(), _sys()
        return json_response(views.topology_detail(details_of(storm_id), window, include_sys))

    @app.get(f"{API}/topology/<storm_id>/component/<component>")
    def component_detail(storm_id: str, component: str):
        window, include_sys = _window(), _sys()
        details = details_of(storm_id)
        answer = views.component_detail(details, component, window, include_sys)
        if answer is None:
            known = ", ".join(c.id for c in details.components)
            raise ApiError(404, "Component not found",
                           f"topology {details.name} ({details.id}) has no component {component!r} "
                           f"(components: {known})")
        return json_response(answer)

    @app.get(f"{API}/topology/<storm_id>/visualization")
    def visualization(storm_id: str):
        window, include_sys = _window(), _sys()
        return json_response(views.visualization(details_of(storm_id), window, include_sys))

    @app.get(f"{API}/topology-workers/<storm_id>")
    def topology_workers(storm_id: str):
        return json_response(views.topology_workers(details_of(storm_id), logviewer_port or 0))

    @app.get(f"{API}/topology/<storm_id>/logconfig")
    def get_logconfig(storm_id: str):
        return json_response(call("get_log_config", name=storm_id))

    # ------------------------------------------------------------------ actions
    def _authorized(op: str, storm_id: str) -> None:
        """Actions are the admin's: the guard let in only valid credentials, so refuse read-only ones."""
        role = http_auth.current_role()
        if not secured or role == http_auth.ADMIN:
            return
        log.warning("refused %s of %s from %s: %s credentials", op, http_auth.printable(storm_id),
                    request.remote_addr, role)
        raise ApiError(403, "auth", f"auth: {role} credentials cannot {op} {storm_id}: actions need the header "
                                    f"'Authorization: Bearer <nimbus.authentication.secret>' (or its login)")

    def _done(op: str, storm_id: str) -> Response:
        return json_response({"topologyOperation": op, "topologyId": storm_id, "status": "success"})

    @app.post(f"{API}/topology/<storm_id>/activate")
    def activate(storm_id: str):
        _authorized("activate", storm_id)
        call("activate", name=storm_id)
        return _done("activate", storm_id)

    @app.post(f"{API}/topology/<storm_id>/deactivate")
    def deactivate(storm_id: str):
        _authorized("deactivate", storm_id)
        call("deactivate", name=storm_id)
        return _done("deactivate", storm_id)

    @app.post(f"{API}/topology/<storm_id>/rebalance/<wait>")
    def rebalance(storm_id: str, wait: str):
        _authorized("rebalance", storm_id)
        args = {"wait_secs": _wait(wait)}
        options = _body().get("rebalanceOptions") or {}
        if not isinstance(options, dict):
            raise ApiError(400, "Bad request", "rebalanceOptions must be a JSON object")
        if options.get("numWorkers") is not None:
            args["num_workers"] = _count(options["numWorkers"], "rebalanceOptions.numWorkers")
        executors = options.get("executors")
        if executors is not None:
            if not isinstance(executors, dict):
                raise ApiError(400, "Bad request", "rebalanceOptions.executors must map component ids to counts")
            args["executors"] = {str(c): _count(n, f"rebalanceOptions.executors.{c}") for c, n in executors.items()}
        call("rebalance", name=storm_id, **args)
        return _done("rebalance", storm_id)

    @app.post(f"{API}/topology/<storm_id>/kill/<wait>")
    def kill(storm_id: str, wait: str):
        _authorized("kill", storm_id)
        call("kill", name=storm_id, wait_secs=_wait(wait))
        return _done("kill", storm_id)

    @app.post(f"{API}/topology/<storm_id>/logconfig")
    def set_logconfig(storm_id: str):
        _authorized("logconfig", storm_id)
        levels = _body().get("namedLoggerLevels")
        if not isinstance(levels, dict):
            raise ApiError(400, "Bad request", "the body must be {\"namedLoggerLevels\": {LOGGER: "
                                               "{\"target_level\": LEVEL, \"timeout\": SECS}}}")
        call("set_log_config", name=storm_id, named_logger_levels=levels)
        return json_response(call("get_log_config", name=storm_id))

    # ------------------------------------------------------------------ Prometheus
    @app.get("/metrics")
    def prometheus():
        return Response(metrics.render(nimbus), mimetype=None, content_type=metrics.CONTENT_TYPE)

    return app


# ---------------------------------------------------------------------- parameters
def _window() -> str:
    window = request.args.get("window", ALL_TIME)
    if window == "all-time":
        window = ALL_TIME
    if window not in WINDOW_NAMES:
        raise ApiError(400, "Bad parameter", f"parameter 'window' must be one of {', '.join(WINDOW_NAMES)}, "
                                             f"got {window!r}")
    return window


def _sys() -> bool:
    value = request.args.get("sys", "0").lower()
    if value not in ("0", "1", "true", "false"):
        raise ApiError(400, "Bad parameter", f"parameter 'sys' must be 0 or 1, got {value!r}")
    return value in ("1", "true")


def _wait(text: str) -> float:
    try:
        wait = float(text)
    except ValueError:
        wait = math.nan
    if not math.isfinite(wait) or wait < 0:
        raise ApiError(400, "Bad parameter", f"wait time must be a number of seconds >= 0, got {text!r}")
    return int(wait) if wait.is_integer() else wait


def _count(value: Any, what: str) -> int:
    """A count from JSON: an int, or a string of digits (Storm's own sample sends "5")."""
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and value.strip().isdigit():
        n = int(value)
    if n is None or n < 1:
        raise ApiError(400, "Bad parameter", f"{what} must be a whole number >= 1, got {value!r}")
    return n


def _body() -> dict:
    if not request.get_data():
        return {}
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError(400, "Bad request", "the request body must be a JSON object")
    return body
