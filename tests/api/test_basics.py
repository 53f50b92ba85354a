"""Authentication in-process over the fakes: every way a request can lack a valid key is a 401 with
the DECISIONS body. tests/e2e/test_api_basics.py keeps one of them against both deployments."""

from __future__ import annotations

import pytest

from tests.api.conftest import App


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer hw_not-a-key"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer"},
    ],
    ids=["no-header", "bad-key", "wrong-scheme", "empty-key"],
)
def test_missing_or_invalid_key_is_401(app: App, headers: dict) -> None:
    r = app.http.get("/v1/users/me", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert set(r.json()) == {"error"}
    assert r.headers["x-request-id"]
