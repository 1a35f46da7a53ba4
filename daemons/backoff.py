"""Exponential back-off for anything retried after failures: a supervisor's worker relaunches,
code downloads (by supervisors and by Nimbus daemons copying code from each other). Pure."""

from __future__ import annotations


def backoff_delay(failures: int, base_secs: float = 1.0, max_secs: float = 60.0, free_retries: int = 0) -> float:
    """Seconds to wait before the next attempt after `failures` consecutive failures: the first
    `free_retries` failures retry at once, then base, 2*base, 4*base ... capped at max_secs."""
    n = failures - free_retries
    if n <= 0:
        return 0.0
    return float(min(max_secs, base_secs * 2 ** min(n - 1, 62)))


def retry_due(failures: int, last_failure_at: float | None, now: float, base_secs: float = 1.0,
              max_secs: float = 60.0) -> bool:
    """Whether a failed operation (e.g. a code download) may be tried again now."""
    if failures <= 0 or last_failure_at is None:
        return True
    return now - last_failure_at >= backoff_delay(failures, base_secs, max_secs)
