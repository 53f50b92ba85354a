"""The test pyramid's shape, from pytest's own collection: how many tests there are per directory
and what share of them is end-to-end (issue 32: at most a third).

A test is end-to-end when it starts a server or Node:
- it is in tests/e2e/ (the end-to-end layer: real services on loopback, the Node runner pool and
  bundler, the AWS handlers emulated; its few tests that start none of them count too), or
- its fixture closure takes a real service (`local_server`, `aws_server`, tests/conftest.py), or a
  fixture of it (as tests/e2e's and tests/security's `server`) or the test itself starts or asks for
  one (`running_server(`, `make_server(`, `Server(`, "local_server", "aws_server").
Tests elsewhere that start Node without a service (the runner's contract over its adapters, the
launcher, the bundler's checks) are counted apart, as "Node, no server": integration tests, not
end-to-end ones. Collection only: nothing runs.

    .venv/bin/python scripts/test_pyramid.py [--list e2e|node|in-process] [pytest args, e.g. tests/api]

`--list KIND` also prints the tests of that kind, one a line.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

E2E_DIR = "tests/e2e/"
SERVER_FIXTURES = {"local_server", "aws_server"}
STARTS_SERVER = re.compile(r"\b(running_server|make_server)\(|\bServer\(|[\"'](local_server|aws_server)[\"']")
STARTS_NODE = re.compile(r"\b(NodeRunnerPool|LocalBundler|LocalRunnerFunction)\(|\[\s*[\"']node[\"']")


def _source(obj: object) -> str:
    try:
        return inspect.getsource(obj)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


class Shape:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []  # (directory, kind)
        self.ids: list[tuple[str, str]] = []  # (test, kind)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            path = item.nodeid.split("::")[0]
            parts = path.split("/")
            directory = "/".join(parts[:2]) if len(parts) > 2 else path
            self.rows.append((directory, self.kind(item, path)))
            self.ids.append((item.nodeid, self.rows[-1][1]))

    @staticmethod
    def kind(item: pytest.Item, path: str) -> str:
        names = set(getattr(item, "fixturenames", ()))
        sources = [_source(getattr(item, "function", None))]
        info = getattr(item, "_fixtureinfo", None)
        for name in names:
            for fixturedef in (info.name2fixturedefs.get(name, ()) if info else ()):
                sources.append(_source(fixturedef.func))
        # A fixture that asks for another by name at run time (`request.getfixturevalue`), as the
        # `server` of tests/e2e and the runner contract's `subject` do: the fixture this item's
        # parameter names (directly, or through a {"param": "fixture"} literal) counts too.
        callspec = getattr(item, "callspec", None)
        if callspec and any("getfixturevalue" in text for text in sources):
            manager = item.session._fixturemanager
            joined = "\n".join(sources)
            for value in callspec.params.values():
                if not isinstance(value, str):
                    continue
                mapped = re.search(rf'"{re.escape(value)}"\s*:\s*"(\w+)"', joined)
                for fixturedef in manager.getfixturedefs(mapped.group(1) if mapped else value, item) or ():
                    sources.append(_source(fixturedef.func))
        text = "\n".join(sources)
        if path.startswith(E2E_DIR) or names & SERVER_FIXTURES or STARTS_SERVER.search(text):
            return "e2e"
        if STARTS_NODE.search(text):
            return "node"
        return "in-process"


def main(argv: list[str]) -> int:
    listed = None
    if argv[:1] == ["--list"]:
        listed, argv = argv[1], argv[2:]
    shape = Shape()
    code = pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", *argv],
                       plugins=[shape])
    if code not in (0, 5):
        return int(code)
    per_dir: dict[str, Counter[str]] = {}
    for directory, kind in shape.rows:
        per_dir.setdefault(directory, Counter())[kind] += 1
    if listed:
        print("\n".join(test for test, kind in shape.ids if kind == listed))
    total = Counter(kind for _, kind in shape.rows)
    n = sum(total.values())
    print(f"\n{'directory':32} {'tests':>6} {'e2e':>6} {'node':>6} {'in-process':>10}")
    for directory in sorted(per_dir, key=lambda d: -sum(per_dir[d].values())):
        c = per_dir[directory]
        print(f"{directory:32} {sum(c.values()):>6} {c['e2e']:>6} {c['node']:>6} {c['in-process']:>10}")
    print(f"{'all':32} {n:>6} {total['e2e']:>6} {total['node']:>6} {total['in-process']:>10}")
    share = total["e2e"] / n if n else 0.0
    print(f"\nend-to-end (a server or Node): {total['e2e']} of {n} = {share:.1%} (target: at most 33.3%)")
    print(f"Node without a server (integration): {total['node']} of {n}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))
