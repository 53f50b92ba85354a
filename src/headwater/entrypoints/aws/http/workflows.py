"""WorkflowsFunction: workflow lists, event summaries and SSE."""

from headwater.api import workflows
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Workflows", [workflows.router])
