"""API Gateway (HTTP API, payload 2.0) handlers: one module per route group of template.yaml."""
