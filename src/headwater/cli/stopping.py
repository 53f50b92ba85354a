"""How `headwater serve` stops: SIGTERM (a service manager, a script) or SIGINT (Ctrl-C) ends
its background work and its runner processes, then the process, by that signal."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("headwater")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """A stop signal came (SIGTERM from a service manager, or Ctrl-C): raised where the main
    thread is, so that the service stops its background work and ends its runners, then exits
    by that signal. A BaseException, so that no `except Exception` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise Stopped until the block ends. Without this, SIGTERM's default ends
    the process where it stands (and uvicorn raises it again after its own graceful stop): the
    runners were never ended, and one its cgroup had frozen stayed frozen for good."""

    def stop(signum: int, _frame: object) -> None:
        for sig in STOP_SIGNALS:  # once: the stop is not cut short by the signal coming again
            signal.signal(sig, signal.SIG_IGN)
        raise Stopped(signum)

    before = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def exit_like(stopped_by: Stopped | None) -> None:
    """After a stop signal and the cleanup: ends the process as that signal's default would have."""
    if stopped_by is not None:
        log.info("stopped by %s", signal.Signals(stopped_by.signum).name)
        signal.signal(stopped_by.signum, signal.SIG_DFL)
        signal.raise_signal(stopped_by.signum)
