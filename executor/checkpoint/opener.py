"""Opening a component's state when its provider may be away: one try now, then at most one a
second; each failure is reported (one line naming the provider) instead of failing the
component, and the checkpoint protocol waits for it (a checkpoint step fails until it opens)."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

log = logging.getLogger(__name__)

RETRY_SECS = 1.0


class StateOpener:
    def __init__(self, conf: Mapping[str, Any], namespace: str, report: Callable[[BaseException], None],
                 clock: Callable[[], float] = time.monotonic):
        self.conf = conf
        self.namespace = namespace
        self._report = report
        self._clock = clock
        self._next_try = 0.0
        self.state = None

    def open(self):
        """The state, or None while it cannot be opened (tried again a second later)."""
        if self.state is not None:
            return self.state
        now = self._clock()
        if now < self._next_try:
            return None
        self._next_try = now + RETRY_SECS
        from executor.state.provider import open_state
        try:
            self.state = open_state(self.conf, self.namespace)
        except Exception as exc:
            log.warning("state %s: %s", self.namespace, exc)
            self._report(exc)
        return self.state
