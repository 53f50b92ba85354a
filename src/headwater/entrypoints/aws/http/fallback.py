"""FallbackFunction, the $default route: what no route matches (trailing-slash forms, the
console, /docs, /openapi.json, unknown paths). It serves the whole app."""

from headwater.api.app import create_app
from headwater.entrypoints.aws import runtime

handler = runtime.http_handler(runtime.Draining(create_app(runtime.services()), runtime.services()), "Fallback")
