"""What one service tells others without calling them (cosmicpython's message bus): a service
publishes a message (domain/messages.py); the composition root subscribes the handlers, once
every service exists, so no two services need each other to be built."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

M = TypeVar("M")


class MessageBus:
    def __init__(self) -> None:
        self._handlers: dict[type, list[Callable[[Any], None]]] = defaultdict(list)

    def subscribe(self, kind: type[M], handler: Callable[[M], None]) -> None:
        self._handlers[kind].append(handler)

    def publish(self, message: object) -> None:
        """Runs every handler of the message's type, in the order they were subscribed."""
        for handler in self._handlers.get(type(message), ()):
            handler(message)
