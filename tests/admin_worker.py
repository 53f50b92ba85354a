"""`python -m tests.admin_worker`: the account verbs of the `headwater` command (users, orgs, keys)
and the operator's `workflows deploy` and `workflows list` for the tests' services, one process per
service that bootstraps once.

Each `headwater users create` costs a new interpreter, its imports and a bootstrap (about a second of
a core); the end-to-end tests make a user or two for almost every test. Here the same commands run
(`headwater.cli.main`: parsing, the handler, its JSON output and error line) in a warm process whose
`services_for` gives the one bootstrapped service instead of a new one. The commands themselves are
tested as a user runs them in tests/e2e/test_cli.py and tests/cli/.

Protocol: a JSON list of arguments a line on stdin; a JSON object (returncode, stdout, stderr) a line
on stdout. The environment (HEADWATER_DATA_DIR, HEADWATER_BACKEND) is the service's."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Iterator

from headwater.bootstrap import Services, bootstrap
from headwater.cli import admin, main
from headwater.settings import Settings

VERBS = {("users", "create"), ("orgs", "create"), ("orgs", "add-member"), ("keys", "create"), ("keys", "revoke"),
         ("workflows", "deploy"), ("workflows", "list")}


def serve(services: Services) -> None:
    @contextlib.contextmanager
    def warm(data_dir: str | None) -> Iterator[Services]:
        yield services

    admin.services_for = warm  # type: ignore[assignment]
    protocol = sys.stdout
    for line in sys.stdin:
        args = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        if tuple(args[:2]) not in VERBS:
            returncode = 2
            err.write(f"error: not an account verb: {args[:2]}")
        else:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                returncode = main(args)
        protocol.write(json.dumps({"returncode": returncode, "stdout": out.getvalue(), "stderr": err.getvalue()}))
        protocol.write("\n")
        protocol.flush()


if __name__ == "__main__":
    warm_services = bootstrap(Settings())
    try:
        serve(warm_services)
    finally:
        warm_services.close()
