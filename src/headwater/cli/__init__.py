"""The `headwater` command: run the service, manage its accounts, registry and workflows, and
drive a running service like Pipedream's `pd` (login, whoami, deploy, list, describe, events, logs,
update, delete, runs, rerun, state, webhooks, subscriptions, logout; init, run and dev to write and try components)."""

from __future__ import annotations

import logging
import os
import sys

import click

from headwater import __version__
from headwater.cli import accounts, admin, client, dev, hooks, oauth, runs, scaffold, state, trial
from headwater.cli.output import handles_errors, json_option, one_line
from headwater.settings import SettingError

# httpx imports its own command line (httpx._main: rich and pygments, about 0.1 s of a core) when
# they are installed, and every `headwater` command that reaches a server imports httpx (imported
# by none of the modules above): not found, httpx.main is its stub, which nothing here calls.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="headwater", message="%(prog)s %(version)s")
def cli() -> None:
    """Headwater: self-hosted event sources."""


for command in (*admin.COMMANDS, *client.COMMANDS, *hooks.COMMANDS, *scaffold.COMMANDS, *trial.COMMANDS,
                *dev.COMMANDS, *runs.COMMANDS):
    cli.add_command(command)
for command in accounts.COMMANDS:
    cli.add_command(command)
for command in state.COMMANDS:  # issue 34, item 2
    cli.add_command(command)
oauth.install(cli)  # after the others: `accounts connect` joins the `accounts` group made above


@cli.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, resolve_path=True))
@admin.data_dir_option
@json_option
@handles_errors
def publish(directory: str, data_dir: str | None, as_json: bool) -> None:
    """Publish a folder of components to the registry (same as `registry publish`)."""
    admin.publish_with_progress(directory, data_dir, as_json)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a request line per call is noise in a CLI
    try:
        cli.main(args=argv, prog_name="headwater", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Abort:
        return 1
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    except SettingError as e:  # the operator's to fix: the variable and what it needs, no traceback
        click.echo(f"error: {e}", err=True)
        return 2
    except Exception as e:  # a bug of ours: still one line, the traceback on request
        if os.environ.get("HEADWATER_DEBUG"):
            raise
        click.echo(f"error: unexpected {type(e).__name__}: {one_line(str(e), None)} "
                   "(HEADWATER_DEBUG=1 shows the traceback)", err=True)
        return 3
    return 0
