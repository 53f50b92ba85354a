"""A workflow's `$.send` destinations that leave the service (http, email, s3), as queued
commands: each attempt is a Send command, a failure queues the next on the webhook retry
schedule, so a send survives restarts and a receiver's outage (SPEC Action run context)."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from headwater.domain.commands import Send
from headwater.domain.routing import outcome_of, parse_retry_after, parse_schedule, retry_delay
from headwater.domain.urls import check_http_url
from headwater.ports import Mailer, ObjectStore, SendResult, Task, UnitOfWorkFactory, WebhookSender
from headwater.settings import Settings

log = logging.getLogger("headwater.destinations")

KINDS = ("http", "email", "s3")


class Destinations:
    def __init__(self, uow: UnitOfWorkFactory, sender: WebhookSender, mailer: Mailer, objects: ObjectStore,
                 settings: Settings) -> None:
        self.uow = uow
        self.sender = sender
        self.mailer = mailer
        self.objects = objects
        self.schedule = parse_schedule(settings.webhook_retry_schedule)

    def problem(self, kind: str, config: dict[str, Any]) -> str | None:
        """Why a send cannot be queued (the workflow run fails with it), or None."""
        if kind == "http":
            url_problem = check_http_url(str(config.get("url", "")))
            return f"$.send.http `url` {url_problem}" if url_problem else None
        if kind == "email":
            if not self.mailer.configured:
                return ("$.send.email is not set up on this service: its operator has not configured SMTP "
                        "(HEADWATER_SMTP_URL)")
            return None if isinstance(config.get("subject"), str) else "$.send.email needs a `subject` string"
        if kind == "s3":
            if not self.objects.configured:
                return "$.send.s3 is not set up on this service: its operator has not configured S3 (HEADWATER_S3_*)"
            if not isinstance(config.get("bucket"), str) or not config.get("bucket"):
                return "$.send.s3 needs a `bucket` string"
            return None
        return f"unknown destination $.send.{kind}"

    def send(self, tasks: list[Task], _: object = None) -> list[str]:
        """Send handler: succeeded, failed (a retry is queued) or dead (the schedule is used up)."""
        return [self._attempt(task.command) for task in tasks]  # type: ignore[arg-type]

    def _attempt(self, command: Send) -> str:
        result = {"http": self._http, "email": self._email, "s3": self._s3}[command.kind](command)
        if outcome_of(result.status) == "succeeded":
            return "succeeded"
        if result.status == 410:
            return "dead"  # Gone: the receiver (or the workflow) asks for no more
        delay = retry_delay(command.attempt + 1, self.schedule, parse_retry_after(result.retry_after, time.time()))
        if delay is None:
            log.warning("$.send.%s of %s gave up after %d attempts: %s", command.kind, command.workflow_id,
                        command.attempt + 1, result.error)
            return "dead"
        with self.uow() as uow:
            uow.outbox.add(replace(command, attempt=command.attempt + 1), delay_s=delay)
            uow.commit()
        return "failed"

    def _http(self, command: Send) -> SendResult:
        config = command.config
        data = config.get("data")
        body = data.encode() if isinstance(data, str) else json.dumps(data).encode() if data is not None else b""
        headers = {str(k).lower(): str(v) for k, v in (config.get("headers") or {}).items()}
        if data is not None and not isinstance(data, str):
            headers.setdefault("content-type", "application/json")
        auth = config.get("auth")
        if isinstance(auth, dict) and "username" in auth:
            token = base64.b64encode(f"{auth['username']}:{auth.get('password', '')}".encode()).decode()
            headers["authorization"] = f"Basic {token}"
        url = str(config.get("url"))
        params = config.get("params")
        if isinstance(params, dict) and params:
            url += ("&" if "?" in url else "?") + urlencode({str(k): str(v) for k, v in params.items()})
        return self.sender.request(str(config.get("method") or "POST").upper(), url, body, headers)

    def _email(self, command: Send) -> SendResult:
        with self.uow(readonly=True) as uow:
            workflow = uow.workflows.get(command.workflow_id)
            owner = uow.users.get(workflow.user_id) if workflow else None
        if owner is None:
            return SendResult(410, "the workflow or its owner is gone")  # nothing to retry
        config = command.config
        text, html = config.get("text"), config.get("html")
        return self.mailer.send(owner.email, str(config.get("subject")), text if isinstance(text, str) else None,
                                html if isinstance(html, str) else None)

    def _s3(self, command: Send) -> SendResult:
        config = command.config
        key = f"{config.get('prefix') or ''}{uuid.uuid5(uuid.NAMESPACE_URL, command.key)}.json"
        body = json.dumps(config.get("payload"), separators=(",", ":")).encode()
        return self.objects.put(str(config["bucket"]), key, body, "application/json")
