"""The CLI run in-process (click's runner): no HEADWATER_* setting of the machine leaks in, and
the login is kept in the test's own config file. (test_cli_offline.py runs the CLI as a
subprocess and has its own `env`.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in [k for k in os.environ if k.startswith("HEADWATER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HEADWATER_CONFIG", str(tmp_path / "cli" / "config.json"))
    return {"HEADWATER_CONFIG": str(tmp_path / "cli" / "config.json")}
