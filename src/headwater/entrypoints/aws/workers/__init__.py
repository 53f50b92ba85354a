"""SQS consumers (one per queue of template.yaml) and the EventBridge Scheduler target."""
