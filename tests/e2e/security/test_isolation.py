"""Threats 6 and 7: one account seeing another's /tmp files; error events showing the host."""

from __future__ import annotations

import uuid

from headwater.settings import REPO_ROOT
from tests.conftest import Server
from tests.e2e.security.conftest import Account, assert_healthy


def test_accounts_do_not_see_each_others_tmp_files(guarded: Server) -> None:
    name = f"secret-{uuid.uuid4().hex[:8]}"
    writer = Account(guarded).deploy("tmp_files.mjs")
    wrote = writer.run({"op": "write", "name": name, "secret": "the writer's secret"})
    assert wrote["readBack"] == "the writer's secret" and name in wrote["listing"]
    probe = Account(guarded).deploy("tmp_files.mjs").run({"op": "probe", "name": name})
    assert probe["read"] == "ENOENT", probe
    assert isinstance(probe["listing"], list) and name not in probe["listing"], probe
    assert probe["exclusiveCreate"] == "created", probe  # no such file in its /tmp
    assert_healthy(guarded)


def test_error_stacks_show_the_component_and_nothing_of_the_host(guarded: Server) -> None:
    source = Account(guarded).deploy("stack_throw.mjs")
    source.send({})
    error = source.first_error()
    logged = source.wait(lambda events: len(events) >= 1, "the logged error", "$logs")[-1]["message"]
    for text in (error["stack"], logged):
        assert "component.js:" in text, text  # the component's own frames, relative
        for leak in ("worker.mjs", "handle.mjs", "layers/runner", "/runner/", "file://", "node:internal",
                     str(REPO_ROOT), str(guarded.data_dir)):
            assert leak not in text, (leak, text)
    assert error["stack"].startswith("Error: thrown from the component")
    assert error["stack"].count("at deeper (component.js:") == 3
    assert_healthy(guarded)
