"""Errors the core and services raise; the API maps each to one status code (DECISIONS.md)."""

from __future__ import annotations


class HeadwaterError(Exception):
    """Base class: `message` is one human sentence, `details` maps a field to its problems."""

    status = 500

    def __init__(self, message: str, details: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class BadRequest(HeadwaterError):
    status = 400


class Unauthorized(HeadwaterError):
    status = 401


class Forbidden(HeadwaterError):
    status = 403


class NotFound(HeadwaterError):
    status = 404


class Conflict(HeadwaterError):
    """`field` names what was taken or changed meanwhile (a slug, a version), so a caller can
    pick another value or redo its work on fresh data."""

    status = 409

    def __init__(self, message: str, details: dict[str, list[str]] | None = None, field: str | None = None) -> None:
        super().__init__(message, details)
        self.field = field


class PayloadTooLarge(HeadwaterError):
    status = 413


class Invalid(HeadwaterError):
    """Well-formed but unusable input: code that does not load, props that fail validation."""

    status = 422


class QuotaExceeded(HeadwaterError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(HeadwaterError):
    """A dependency (the runner, the bundler) failed on the service's side."""

    status = 503
