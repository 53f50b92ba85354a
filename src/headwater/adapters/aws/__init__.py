"""AWS adapters: the ports over DynamoDB, SQS, EventBridge Scheduler and Lambda."""
