"""How Storm's UI prints things (pure)."""

from __future__ import annotations

from urllib.parse import quote, quote_plus


def pretty_uptime(secs: int | float | None) -> str:
    """Storm's prettyUptimeSec: "3m 53s", "1d 5h 30m 10s" (leading zero units left out)."""
    secs = max(0, int(secs or 0))
    days, rest = divmod(secs, 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (mins, "m")]
    while parts and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{n}{unit}" for n, unit in parts + [(secs, "s")])


def per_second(count: float, secs: float) -> float:
    """A rate: `count` tuples over `secs` seconds (0.0 over no time). `storm-py monitor`'s
    throughput (between two readings) and the UI's per-second figures (over a stats window)."""
    return count / secs if secs > 0 else 0.0


def fixed3(value: float | None) -> str:
    """Latencies and capacity: strings with three decimals, never null (Storm's "%.3f")."""
    return f"{float(value or 0.0):.3f}"


def ui_status(status: str) -> str:
    """Storm's status names: ACTIVE, INACTIVE, KILLED, REBALANCING."""
    return str(status).upper()


def storm_version(version: str | None) -> str:
    """A daemon's version with at least three dot-separated parts (tools parse it as Storm's);
    one that did not say (an older daemon, a checkout never installed) shows as 0.0.0."""
    parts = version.split(".") if version and version != "unknown" else ["0", "0", "0"]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def executor_name(executor) -> str:
    """Storm's executor id as its UI prints it: "[2, 2]"."""
    return f"[{int(executor[0])}, {int(executor[1])}]"


def encoded(text: str) -> str:
    """A path segment or query value as Storm's UI encodes ids (URLEncoder: spaces as '+')."""
    return quote_plus(text, safe="")


def log_link(host: str | None, logviewer_port: int | None, storm_id: str, port: int | None,
             https: bool = False) -> str:
    """The logviewer link to a worker's log (workers-artifacts/{id}/{port}/worker.log); `https`:
    the logviewer serves HTTPS only."""
    if not host or not logviewer_port or port is None:
        return ""
    scheme = "https" if https else "http"
    return f"{scheme}://{host}:{logviewer_port}/log?file={quote(f'{storm_id}/{port}/worker.log', safe='')}"
