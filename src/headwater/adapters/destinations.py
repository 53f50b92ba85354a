"""Where a workflow's `$.send.email` and `$.send.s3` go, when the operator configures them:
SMTP (`HEADWATER_SMTP_URL`, `HEADWATER_EMAIL_FROM`) and S3 or an S3-compatible store
(`HEADWATER_S3_ENABLED=1`, optional `HEADWATER_S3_ENDPOINT_URL`, credentials the AWS way)."""

from __future__ import annotations

import smtplib
import time
from email.message import EmailMessage
from typing import Any
from urllib.parse import unquote, urlsplit

from headwater.ports import SendResult
from headwater.settings import Settings

_TIMEOUT_S = 15.0


class SmtpMailer:
    def __init__(self, settings: Settings) -> None:
        self.url = urlsplit(settings.smtp_url) if settings.smtp_url else None
        self.sender = settings.email_from

    @property
    def configured(self) -> bool:
        return self.url is not None and self.url.scheme in ("smtp", "smtps") and bool(self.url.hostname)

    def send(self, to: str, subject: str, text: str | None, html: str | None) -> SendResult:
        assert self.url is not None
        started = time.monotonic()
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = self.sender, to, subject
        message.set_content(text or "")
        if html:
            message.add_alternative(html, subtype="html")
        smtp_class = smtplib.SMTP_SSL if self.url.scheme == "smtps" else smtplib.SMTP
        try:
            with smtp_class(self.url.hostname or "", self.url.port or 0, timeout=_TIMEOUT_S) as smtp:
                if self.url.username:
                    smtp.login(unquote(self.url.username), unquote(self.url.password or ""))
                smtp.send_message(message)
        except (OSError, smtplib.SMTPException) as e:
            return SendResult(None, f"SMTP: {type(e).__name__}: {e}"[:500], None, _ms(started))
        return SendResult(200, None, None, _ms(started))


class S3ObjectStore:
    def __init__(self, settings: Settings, client: Any = None) -> None:
        self.enabled = settings.s3_enabled
        self.endpoint_url = settings.s3_endpoint_url or None
        self._client = client

    @property
    def configured(self) -> bool:
        return self.enabled

    def client(self) -> Any:
        if self._client is None:
            import boto3
            self._client = boto3.client("s3", endpoint_url=self.endpoint_url)
        return self._client

    def put(self, bucket: str, key: str, body: bytes, content_type: str) -> SendResult:
        started = time.monotonic()
        try:
            self.client().put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
        except Exception as e:  # noqa: BLE001 - botocore's errors, credentials, the network: all a failed attempt
            return SendResult(None, f"S3: {type(e).__name__}: {e}"[:500], None, _ms(started))
        return SendResult(200, None, None, _ms(started))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
