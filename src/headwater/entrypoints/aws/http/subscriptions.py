"""SubscriptionsFunction: /v1/subscriptions, /v1/auto_subscriptions and their lists."""

from headwater.api import subscriptions
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Subscriptions", [subscriptions.router])
