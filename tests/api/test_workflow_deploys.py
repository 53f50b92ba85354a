"""`POST /v1/workflows` in-process over the fakes: what it refuses. A workflow deployed, run, replaced
and deleted with a key, in both deployments, is tests/e2e/test_workflow_deploys.py."""

from __future__ import annotations

import httpx


def test_a_file_path_or_an_unknown_field_is_refused(api: httpx.Client) -> None:
    path = api.post("/workflows", json={"name": "p", "steps": [{"name": "a", "component": "steps/a.mjs"}]})
    assert path.status_code == 422 and "component_code" in path.json()["error"]
    typo = api.post("/workflows", json={"name": "p", "steps": [{"name": "a", "component": "x", "prop": {}}]})
    assert typo.status_code == 400 and "steps.0.prop" in typo.json()["details"]
    assert api.get("/users/me/workflows").json()["data"] == []
