"""HEADWATER_BACKEND=aws-emulated: the AWS deployment of template.yaml on this machine, without
an account or Docker. API requests become API Gateway v2 events for the handler the template
routes them to; the adapters talk to an in-process moto server provisioned from the template;
pollers do what AWS would (SQS event source mappings, Scheduler schedules). See docs/aws.md."""
