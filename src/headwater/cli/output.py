"""How every command prints: `--json` gives one JSON document on stdout, else readable text; a
failure is one line on stderr (JSON with --json) and exit status 2, never a traceback."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import click

from headwater.domain.errors import HeadwaterError

if TYPE_CHECKING:
    import httpx

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


def unreachable(e: httpx.HTTPError) -> Failure:
    """A transport failure (server down, bad address, timeout) as one sentence naming the server."""
    try:
        url = e.request.url
        where = f"{url.scheme}://{url.netloc.decode()}"
    except RuntimeError:  # an error raised before any request was built has no .request
        where = "the server"
    import httpx

    reason = str(e).strip() or type(e).__name__
    if isinstance(e, httpx.ConnectError) and "refused" in reason.lower():
        reason = "connection refused (is `headwater serve` running there?)"
    return Failure(f"Cannot reach {where}: {reason}")


def one_line(message: str, details: dict[str, Any] | None) -> str:
    """The message with the fields at fault appended, all on one line (a shell reads one line)."""
    text = " ".join(message.split())
    if details:
        problems = ", ".join(f"{field}: {'; '.join(map(str, p if isinstance(p, list) else [p]))}"
                             for field, p in details.items())
        text += f" ({' '.join(problems.split())})"
    return text


def handles_errors(f: F) -> F:
    """HeadwaterError, Failure and transport errors become the one-line error output, status 2."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (HeadwaterError, Failure) as e:
            fail(e, kwargs.get("as_json", False))
        except Exception as e:
            if not transport_error(e):
                raise
            fail(unreachable(e), kwargs.get("as_json", False))

    return wrapper  # type: ignore[return-value]


def transport_error(e: BaseException) -> TypeGuard[httpx.HTTPError]:
    """An httpx transport or status error. httpx is imported by the commands that reach a server,
    not here: a command that never imported it cannot have raised one of its errors."""
    httpx = sys.modules.get("httpx")
    return httpx is not None and isinstance(e, httpx.HTTPError)


def fail(e: HeadwaterError | Failure, as_json: bool) -> None:
    details = getattr(e, "details", None)
    if as_json:
        click.echo(json.dumps({"error": e.message, **({"details": details} if details else {})}), err=True)
    else:
        click.echo(f"error: {one_line(e.message, details)}", err=True)
    raise SystemExit(2) from None
