"""HttpIngestFunction: `ANY /http/{endpoint_id}[/...]`, the HTTP interface of sources.

A plain source is answered once its run is queued (SQS). A `customResponse` source is run here,
inline, and answered with what it responds (SqsTaskQueue.ingest), which API Gateway allows 29 s:
a run still going then gets API Gateway's 503, and its queued message runs it again later
(docs/aws.md, Limits). Every answer is sandboxed out of the console's origin
(api/endpoint_origin.py), faults' 500s included."""

from headwater.api.app import create_api
from headwater.api.endpoint_origin import EndpointOrigin
from headwater.api.ingest import IngestApp
from headwater.api.middleware import ContainFaults
from headwater.entrypoints.aws import runtime

_services = runtime.services()
_app = IngestApp(_services.ingest, _services.settings.http_max_body_bytes,
                 create_api(_services, [], site=False))
handler = runtime.http_handler(EndpointOrigin(ContainFaults(runtime.Draining(_app, _services))), "HttpIngest")
