"""SourcesFunction: /v1/sources (deploy, update, delete, manual run) and the lists of sources."""

from headwater.api import sources
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Sources", [sources.router])
