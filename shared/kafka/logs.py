"""Keep aiokafka's own log lines readable during a broker outage.

While a broker is down aiokafka logs every reconnect attempt, metadata refresh and
failed fetch — hundreds of lines a second across producers and consumers. This filter
lets each distinct message template through once per `window` seconds and says how
many were held back.
"""

from __future__ import annotations

import logging
import time


class RepeatFilter(logging.Filter):
    def __init__(self, window: float = 30.0) -> None:
        super().__init__()
        self.window = window
        self._last: dict[tuple[str, object], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg)
        now = time.monotonic()
        seen = self._last.get(key)
        if seen is not None and now - seen[0] < self.window:
            self._last[key] = (seen[0], seen[1] + 1)
            return False
        if seen is not None and seen[1]:
            record.msg = f"{record.msg} [{seen[1]} similar lines held back in the last {self.window:.0f} s]"
        if len(self._last) > 1000:
            self._last.clear()
        self._last[key] = (now, 0)
        return True


_FILTER = RepeatFilter()


def quiet_aiokafka() -> None:
    """Attach the filter to every aiokafka logger (a logger's filters do not apply to its
    children, so each module's logger gets it). Idempotent; call after importing aiokafka."""
    import aiokafka.admin
    import aiokafka.consumer
    import aiokafka.producer  # noqa: F401

    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or not (name == "aiokafka" or name.startswith("aiokafka.")):
            continue
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
