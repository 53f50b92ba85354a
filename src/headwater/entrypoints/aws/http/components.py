"""ComponentsFunction: /v1/components (saving, reading, lists, a run without deploying), the registry,
prop options."""

from headwater.api import components, props, registry, trials
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Components", [registry.router, props.router, components.router, trials.router])
