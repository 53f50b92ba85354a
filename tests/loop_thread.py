"""An event loop running in a thread of its own, as the server's is: for tests that hand it
coroutines (or adapters that read their pipes there) from the test's own thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loop_in_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
