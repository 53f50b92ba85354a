"""How every command prints: `--json` gives one JSON document on stdout, else readable text; a
failure is one line on stderr (JSON with --json) and exit status 2."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from headwater.domain.errors import HeadwaterError

F = TypeVar("F", bound=Callable[..., Any])


class Failure(Exception):
    """A client-side failure with the service's error body (or our own sentence)."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print JSON")(f)


def emit(as_json: bool, value: Any, text: str | None = None) -> None:
    click.echo(json.dumps(value) if as_json or text is None else text)


def handles_errors(f: F) -> F:
    """HeadwaterError and Failure become the one-line error output and exit status 2."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (HeadwaterError, Failure) as e:
            details = getattr(e, "details", None)
            if kwargs.get("as_json"):
                click.echo(json.dumps({"error": e.message, **({"details": details} if details else {})}), err=True)
            else:
                click.echo(f"error: {e.message}", err=True)
                for field, problems in (details or {}).items():
                    click.echo(f"  {field}: {'; '.join(map(str, problems))}", err=True)
            raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]
