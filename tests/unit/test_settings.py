"""Settings read from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.settings import SettingError, Settings


def test_relative_path_settings_mean_the_current_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("DATA_DIR", "RUNNER_DIR", "REGISTRY_DIR"):
        monkeypatch.setenv(f"HEADWATER_{name}", f"rel/{name.lower()}")
    settings = Settings()
    assert settings.data_dir == tmp_path / "rel" / "data_dir"
    assert settings.runner_dir == tmp_path / "rel" / "runner_dir"
    assert settings.registry_dir == tmp_path / "rel" / "registry_dir"


def test_metrics_name_no_source_and_need_no_token_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWATER_METRICS_SOURCES", raising=False)
    monkeypatch.delenv("HEADWATER_METRICS_TOKEN", raising=False)
    settings = Settings()
    assert (settings.metrics_sources, settings.metrics_token) == (0, "")
    monkeypatch.setenv("HEADWATER_METRICS_SOURCES", "50")
    monkeypatch.setenv("HEADWATER_METRICS_TOKEN", "0123456789abcdef")
    settings = Settings()
    assert (settings.metrics_sources, settings.metrics_token) == (50, "0123456789abcdef")
    assert "0123456789abcdef" not in repr(settings)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("METRICS_SOURCES", "lots", "HEADWATER_METRICS_SOURCES must be a whole number of 0 or more, not 'lots'."),
    ("METRICS_SOURCES", "-1", "HEADWATER_METRICS_SOURCES must be a whole number of 0 or more, not '-1'."),
    ("METRICS_TOKEN", "short", "HEADWATER_METRICS_TOKEN must be at least 16 printable ASCII characters"),
    ("METRICS_TOKEN", "a token with spaces in it", "HEADWATER_METRICS_TOKEN must be at least 16"),
    ("METRICS_TOKEN", "0123456789abcdef\n", "HEADWATER_METRICS_TOKEN must be at least 16"),
])
def test_bad_metrics_settings_fail_with_the_variable_named(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                                           message: str) -> None:
    monkeypatch.setenv(f"HEADWATER_{name}", value)
    with pytest.raises(SettingError) as caught:
        Settings()
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert value not in str(caught.value) or name != "METRICS_TOKEN"  # a secret is not echoed
