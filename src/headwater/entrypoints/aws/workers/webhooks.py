"""WebhookDeliveryFunction: webhook attempts and workflow sends, each retried on its schedule."""

from headwater.entrypoints.aws import runtime

handler = runtime.sqs_handler("Deliveries")
