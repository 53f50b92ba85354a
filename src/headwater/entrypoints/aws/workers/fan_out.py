"""FanOutFunction: committed events to the subscribers of their emitter (runs, webhook deliveries)."""

from headwater.entrypoints.aws import runtime

handler = runtime.sqs_handler("FanOut")
