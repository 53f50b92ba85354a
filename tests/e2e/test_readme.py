"""The README runs as written: every fenced block, in order, against a real service (the
session's: the README's user, `ada`, and everything after is new there).

Shell blocks run command by command in bash (from a folder with the checkout's `.venv`), with
the README's placeholders (`hw_...`, `u_...`, `dc_...`, `en_...`, `wh_...`, `p_...`, `ss_...`) replaced by the
ids the commands before them printed, `127.0.0.1:8000`/`localhost:8000` by the service's address,
and the example webhook address by one on loopback. Every command must succeed (curl with
`--fail-with-body`), and the output a README comment shows is checked: a comment line right under
a command, or a trailing comment that is JSON (`...` stands for anything). A command that reads
what a run made is asked again until the output is there; one that follows (`-f`) is stopped
once it printed. Component and YAML blocks are the files the commands use (FILES). A block that
is neither run nor a file is listed in NOT_RUN with the reason, and any other block fails the test:
so the README cannot drift from what the service does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, Server, free_port

README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = {"sh", "bash", "shell", "console"}

# Blocks that are not run, each known by a text it contains, with the reason.
NOT_RUN = {
    "make run    #": "installs everything and serves: the test has its own service, and `make test` is "
                     "the suite this test is part of",
    "$ .venv/bin/headwater dev ": "a transcript of a `dev` session, which runs until Ctrl-C and waits for saves: "
                                  "tests/e2e/test_cli_develop.py runs it end to end",
}
# Blocks that are files the commands after them use (written next to them), by their text.
FILES = {
    'name: "Double"': "double.mjs",
    "name: enrich-orders": "enrich.yaml",
}

PLACEHOLDER = re.compile(r"\b(hw|u|dc|en|wh|p|ss)_\.\.\.")
PRINTED_ID = re.compile(r"\b(hw|u|dc|en|wh|p|ss)_[A-Za-z0-9_-]+")
WAIT_S = 60


@dataclass
class Command:
    text: str  # one logical line (continuations joined), its trailing comment still on it
    expected: list[str] = field(default_factory=list)  # the comment lines right under it


def blocks() -> list[tuple[str, str]]:
    return [(language, body) for language, body in FENCE.findall(README.read_text())]


def commands(body: str) -> Iterator[Command | str]:
    """A shell block's commands with the comments under them; an assignment as its text."""
    current: Command | None = None
    pending = ""
    for line in body.splitlines():
        if pending:
            pending += "\n" + line
        elif not line.strip():
            current = None
            continue
        elif line.lstrip().startswith("#"):
            if current is not None:
                current.expected.append(line.lstrip()[1:].strip())
            continue
        else:
            pending = line
        if pending.endswith("\\"):
            continue
        if re.match(r"^[A-Z_]+=", pending):
            yield pending
            current = None
        else:
            current = Command(pending)
            yield current
        pending = ""


def split_comment(text: str) -> tuple[str, str]:
    """A command and its trailing comment (` # ...` outside quotes; '' if none)."""
    quote = ""
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and i > 0 and text[i - 1] in " \t":
            return text[:i].rstrip(), text[i + 1:].strip()
    return text, ""


def as_pattern(text: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in text.split("...")]
    return re.compile(r"\s+".join(".*?".join(parts).split(r"\ ")), re.DOTALL)


def expected_json(text: str) -> Any:
    text = re.sub(r"\(.*\)$", "", text).strip()  # `{...}   (the key is shown once)`
    text = "{" + text + "}" if text.startswith('"') else text
    return json.loads(text.replace("[...]", "[]").replace(", ...}", "}"))


def contains(found: Any, wanted: Any) -> bool:
    """Whether `wanted` is in `found`, anywhere in it: a dict as a subset of one of its dicts,
    `[]` as any list, a string with `...` as a pattern."""
    if isinstance(wanted, dict) and isinstance(found, dict) and all(
            k in found and contains(found[k], v) for k, v in wanted.items()):
        return True
    if isinstance(wanted, list) and isinstance(found, list) and not wanted:
        return True
    if isinstance(wanted, str) and isinstance(found, str):
        return bool(as_pattern(wanted).fullmatch(found))
    if not isinstance(wanted, dict | list) and not isinstance(found, dict | list) and found == wanted:
        return True
    inside = found.values() if isinstance(found, dict) else found if isinstance(found, list) else []
    return isinstance(wanted, dict) and any(contains(f, wanted) for f in inside)


def output_shows(output: str, expectation: str) -> bool:
    if expectation.startswith(("{", '"')):
        try:
            found = json.loads(output)
        except ValueError:
            return False
        return contains(found, expected_json(expectation))
    return bool(as_pattern(expectation).search(output))


class Reader:
    """Runs the README: its address, the ids printed so far, the folder the commands run in."""

    def __init__(self, server: Server, work: Path) -> None:
        self.server = server
        self.work = work
        self.ids: dict[str, str] = {}
        self.ran: list[tuple[str, list[str]]] = []  # each command run, with the outputs it was checked for
        self.hook = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: deliveries are retried
        home = work.parent / "home"
        home.mkdir()
        self.env = {k: v for k, v in server.env.items() if k not in {"XDG_CONFIG_HOME", "HEADWATER_CONFIG"}}
        self.env["HOME"] = str(home)
        (work / ".venv").symlink_to(ROOT / ".venv")

    def address(self, text: str) -> str:
        host = f"127.0.0.1:{self.server.port}"
        return (text.replace("https://example.com/hook", self.hook)
                .replace("127.0.0.1:8000", host).replace("localhost:8000", host))

    def filled(self, text: str, strict: bool = True) -> str:
        def fill(m: re.Match[str]) -> str:
            assert m.group(1) in self.ids or not strict, f"the README uses {m.group(0)} before a command printed one"
            return self.ids.get(m.group(1), m.group(0))
        return PLACEHOLDER.sub(fill, self.address(text))

    def write_files(self) -> None:
        """The FILES blocks as they read with the ids printed so far (a workflow's `trigger: dc_...`)."""
        for language, body in blocks():
            name = next((n for key, n in FILES.items() if key in body), None)
            if name is not None and language not in SHELL:
                (self.work / name).write_text(self.filled(body, strict=False))

    def run(self, command: Command, prelude: list[str]) -> None:
        self.write_files()
        code, comment = split_comment(command.text)
        script = re.sub(r"(^|\s)curl -s ", r"\1curl -sS --fail-with-body ", self.filled(code))
        full = "\n".join([*prelude, script])
        expected = [self.address(e) for e in command.expected]
        expected += [self.address(comment)] if comment.startswith("{") else []
        if re.search(r"\s-f(\s|$)", code):
            output = self.follow(full)
        else:
            output = self.until_shown(full, expected, reads_only=self.reads_only(code))
        for expectation in expected:
            assert output_shows(output, expectation), f"{command.text!r} printed {output!r}, not {expectation!r}"
        self.ran.append((code, expected))
        if self.creates(code) or re.search(r"\bstate \S+ snapshots\b", code):  # snapshots: the ids a restore names
            self.remember(output)

    def remember(self, output: str) -> None:
        seen: set[str] = set()
        for m in PRINTED_ID.finditer(output):
            if m.group(1) not in seen:
                seen.add(m.group(1))
                self.ids[m.group(1)] = m.group(0)

    @staticmethod
    def creates(code: str) -> bool:
        return bool(re.search(r"\b(create|deploy)\b|\s-d\s|-X POST", code))

    @staticmethod
    def reads_only(code: str) -> bool:
        return not Reader.creates(code) and bool(re.search(r"\bcurl\b|headwater (events|logs|runs)\b", code))

    def shell(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", script], cwd=self.work, env=self.env, capture_output=True, text=True,
                              timeout=300)

    def until_shown(self, script: str, expected: list[str], reads_only: bool) -> str:
        deadline = time.monotonic() + WAIT_S
        while True:
            done = self.shell(script)
            assert done.returncode == 0, \
                f"{script!r} failed ({done.returncode}): {done.stdout[-1500:]} {done.stderr[-1500:]}"
            if not reads_only or all(output_shows(done.stdout, e) for e in expected) or time.monotonic() > deadline:
                return done.stdout
            time.sleep(0.2)  # what a run made is not there yet: ask again

    def follow(self, script: str) -> str:
        """A command that follows (`-f`): what it printed first, then it is stopped."""
        proc = subprocess.Popen(["bash", "-c", script], cwd=self.work, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # the events already there come first
            assert line, f"{script!r} printed nothing (exit {proc.poll()})"
            return line
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: bash and the command it started
            proc.wait(timeout=30)


def test_every_block_is_run_or_listed_with_its_reason() -> None:
    for language, body in blocks():
        known = [key for key in (*NOT_RUN, *FILES) if key in body]
        assert language in SHELL or known, f"a README block that is neither run nor listed:\n{body}"
    for key in (*NOT_RUN, *FILES):
        assert any(key in body for _, body in blocks()), f"{key!r} is listed but no README block has it"


def test_the_readme_runs_as_written(server: Server, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    reader = Reader(server, work)
    for language, body in blocks():
        if language not in SHELL or any(key in body for key in NOT_RUN):
            continue
        prelude: list[str] = []
        for command in list(commands(body)):  # whole, so each command has the comments under it
            if isinstance(command, str):
                prelude.append(reader.filled(command))
            else:
                reader.run(command, prelude)
    assert {"hw", "u", "dc", "en", "wh", "p"} <= set(reader.ids)
    checked = [e for _, expected in reader.ran for e in expected]
    assert '{"raw_event": 42}' in checked and any("doubling 21" in e for e in checked), checked
