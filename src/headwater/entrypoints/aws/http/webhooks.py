"""WebhooksFunction: /v1/webhooks, their deliveries and manual retries."""

from headwater.api import webhooks
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Webhooks", [webhooks.router])
