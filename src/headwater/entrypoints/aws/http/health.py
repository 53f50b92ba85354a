"""HealthFunction: /healthz and /metrics (and the console and API pages when routed here)."""

from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Health", [], site=True)
