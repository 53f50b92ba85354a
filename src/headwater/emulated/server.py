"""`HEADWATER_BACKEND=aws-emulated headwater serve`: moto, provisioned from template.yaml; the
functions' handlers; API Gateway in front of them on the usual host and port; the pollers.
`headwater serve` and bootstrap find this deployment by its entry point (pyproject.toml,
headwater/deployments.py): the product never imports this package."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from headwater.emulated.deployment import STATE_FILE, load_environment, provision, start_moto
from headwater.emulated.functions import Functions
from headwater.emulated.gateway import Gateway
from headwater.emulated.pollers import SchedulePoller, SqsPoller, StackSchedules
from headwater.emulated.template import Template
from headwater.services.registry import SHIPPED_MARKER, publish_shipped_registry
from headwater.settings import Settings

log = logging.getLogger("headwater.emulated")


class EmulatedDeployment:
    """HEADWATER_BACKEND=aws-emulated as headwater/deployments.py finds it (its `Deployment`)."""

    def load_environment(self, data_dir: Path) -> None:
        load_environment(data_dir)

    def serve(self, settings: Settings, log_level: str) -> None:
        serve(settings, log_level)


deployment = EmulatedDeployment()  # the entry point's object


def serve(settings: Settings, log_level: str) -> None:
    import boto3
    import uvicorn

    # The functions read their settings from the environment, as on Lambda.
    os.environ.update({"HEADWATER_BACKEND": "aws-emulated", "HEADWATER_HOST": settings.host,
                       "HEADWATER_PORT": str(settings.port), "HEADWATER_DATA_DIR": str(settings.data_dir)})
    for noisy in ("werkzeug", "mangum"):  # a line per moto call and per request
        logging.getLogger(noisy).setLevel(logging.WARNING)
    moto = start_moto()
    host, port = moto.get_host_and_port()
    template = Template.read()
    deployment = provision(template, f"http://{host}:{port}", settings.public_url)
    deployment.apply()
    deployment.save(settings.data_dir)
    pollers: list[Any] = []
    functions: Functions | None = None
    try:
        from headwater.entrypoints.aws import runtime

        services = runtime.services()
        (settings.data_dir / SHIPPED_MARKER).unlink(missing_ok=True)  # a new deployment starts empty
        publish_shipped_registry(services.registry, services.settings)
        functions = Functions(template.functions(), deployment.arns)
        sqs = boto3.client("sqs", endpoint_url=deployment.endpoint)
        for function in functions.functions.values():
            for queue, batch in function.queues:
                pollers.append(SqsPoller(sqs, functions, function.name, deployment.queue_urls[queue],
                                         deployment.arns[queue], batch))
        for group in template.of_type("AWS::Scheduler::ScheduleGroup"):
            queue_urls = {deployment.arns[q]: url for q, url in deployment.queue_urls.items()}
            pollers.append(SchedulePoller(boto3.client("scheduler", endpoint_url=deployment.endpoint), sqs, functions,
                                          deployment.names[group], queue_urls))
        pollers.append(StackSchedules(functions, template.schedules(), time.time(),
                                      period_s=settings.emulated_schedule_s))
        for poller in pollers:
            poller.start()
        gateway = Gateway(template.routes(), functions, f"{settings.host}:{settings.port}")
        log.info("emulated AWS deployment: moto at %s, %d functions, %d routes", deployment.endpoint,
                 len(functions.functions), len(gateway.routes))
        uvicorn.run(gateway, host=settings.host, port=settings.port, log_level=log_level, access_log=False,
                    timeout_graceful_shutdown=3)
    finally:
        for poller in pollers:
            poller.stop()
        if functions is not None:
            functions.close()
        if "headwater.entrypoints.aws.runtime" in __import__("sys").modules:
            from headwater.entrypoints.aws import runtime

            runtime.services().close()
        (settings.data_dir / STATE_FILE).unlink(missing_ok=True)
        moto.stop()
