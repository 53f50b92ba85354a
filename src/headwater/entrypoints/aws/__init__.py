"""The Lambda handlers of template.yaml: `http/` (API Gateway routes, one module per route
group), `workers/` (SQS consumers and the EventBridge Scheduler target). Each is thin: the
services are built once per container in `runtime`, and a handler only adapts an event to them."""
