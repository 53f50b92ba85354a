"""Settings read from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.settings import Settings


def test_relative_path_settings_mean_the_current_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("DATA_DIR", "RUNNER_DIR", "REGISTRY_DIR"):
        monkeypatch.setenv(f"HEADWATER_{name}", f"rel/{name.lower()}")
    settings = Settings()
    assert settings.data_dir == tmp_path / "rel" / "data_dir"
    assert settings.runner_dir == tmp_path / "rel" / "runner_dir"
    assert settings.registry_dir == tmp_path / "rel" / "registry_dir"
