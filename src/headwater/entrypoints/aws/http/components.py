"""ComponentsFunction: /v1/components (saving, reading, lists), the registry, prop options."""

from headwater.api import components, props, registry
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Components", [registry.router, props.router, components.router])
