"""WorkflowsFunction: workflow lists, event summaries and SSE, deploys and deletes with a key."""

from headwater.api import workflow_deploys, workflows
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Workflows", [workflows.router, workflow_deploys.router])
