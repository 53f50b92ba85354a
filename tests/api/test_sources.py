"""Sources over /v1, in-process over the fakes: prop validation, unknown and foreign ids, mistyped
bodies. A component here is what the runner's `describe` answered for the JS of
tests/components/sources_api/ (FakeRunner takes the definition as a literal); what needs the code
to run, or the real describe, is tests/e2e/test_sources_api.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from headwater.domain.events import Emit
from headwater.domain.runs import RunResult
from headwater.ports import Instance
from tests.api.conftest import App

# describe's answer for tests/components/sources_api/issue_tracker.mjs
TRACKER = repr({
    "name": "New Issues (Tracker)", "version": "1.2.0", "type": "source", "key": "sources-api-issue-tracker",
    "description": "Emit new issues of a project.", "dedupe": None, "hooks": [], "has_additional_props": False,
    "configurable_props": [
        {"name": "db", "type": "$.service.db"},
        {"name": "timer", "type": "$.interface.timer", "label": "Polling interval",
         "default": {"intervalSeconds": 900}},
        {"name": "project", "type": "string", "label": "Project", "description": "The project key, e.g. `ENG`"},
        {"name": "maxResults", "type": "integer", "label": "Max Results", "min": 1, "max": 50},
        {"name": "includeClosed", "type": "boolean", "label": "Include closed issues"},
        {"name": "query", "type": "object", "label": "Extra query parameters"},
        {"name": "labels", "type": "string[]", "label": "Labels"},
        {"name": "priority", "type": "string", "label": "Priority", "options": ["low", "medium", "high"]},
        {"name": "region", "type": "string", "label": "Region", "options": [
            {"label": "US East (N. Virginia)", "value": "us-east-1"},
            {"label": "EU (Frankfurt)", "value": "eu-central-1"}]},
        {"name": "sortOrder", "type": "string", "label": "Sort order", "optional": True, "default": "desc"},
        {"name": "pageSize", "type": "integer", "label": "Page size", "optional": True, "default": 25},
        {"name": "assignee", "type": "string", "label": "Assignee", "optional": True},
    ],
})
# describe's answer for tests/components/sources_api/lifecycle.mjs (its hooks emit {"hook": name})
LIFECYCLE = repr({
    "name": "Lifecycle Recorder", "version": "0.1.0", "type": "source", "key": "sources-api-lifecycle",
    "dedupe": None, "hooks": ["deploy", "activate", "deactivate"], "has_additional_props": False,
    "configurable_props": [
        {"name": "db", "type": "$.service.db"},
        {"name": "label", "type": "string", "label": "Label", "optional": True, "default": "v1"},
        {"name": "witnessUrl", "type": "string", "label": "Witness URL", "optional": True},
    ],
})
ECHO = repr({"name": "My Source", "version": "0.0.1", "type": "source", "key": "sources-api-echo-0",
             "configurable_props": [{"name": "db", "type": "$.service.db"}]})

TRACKER_VALID: dict[str, Any] = {
    "project": "ENG",
    "maxResults": 10,
    "includeClosed": False,
    "query": {"jql": "status = Open"},
    "labels": ["bug", "p1"],
    "priority": "high",
    "region": "eu-central-1",
}


@pytest.fixture(autouse=True)
def hooks_emit_their_name(app: App) -> None:
    """The module's app is shared: each test starts with hooks that emit their name and no-op runs."""
    app.world.runner.hooks = lambda instance, hook: RunResult(emits=[Emit({"hook": hook})])
    app.world.runner.script = lambda instance, event: RunResult()


def create(api: httpx.Client, **body: Any) -> dict:
    r = api.post("/sources", json=body)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def hooks_seen(api: httpx.Client, source_id: str) -> list[str]:
    r = api.get(f"/sources/{source_id}/event_summaries", params={"expand": "event"})
    assert r.status_code == 200, r.text
    return [i["event"]["hook"] for i in reversed(r.json()["data"]) if "hook" in i["event"]]


def assert_422(r: httpx.Response, *props: str) -> dict:
    assert r.status_code == 422, r.text
    body = r.json()
    assert set(body) == {"error", "details"}, body
    assert set(body["details"]) == set(props), body
    for problems in body["details"].values():
        assert problems and all(isinstance(p, str) and p for p in problems), body
    return body


# prop validation

BAD_TRACKER_PROPS = [
    pytest.param({"project": None}, "project", id="required-missing"),
    pytest.param({"project": 5}, "project", id="string-gets-number"),
    pytest.param({"maxResults": "10"}, "maxResults", id="integer-gets-string"),
    pytest.param({"maxResults": 2.5}, "maxResults", id="integer-gets-float"),
    pytest.param({"maxResults": True}, "maxResults", id="integer-gets-boolean"),
    pytest.param({"maxResults": 0}, "maxResults", id="integer-below-min"),
    pytest.param({"maxResults": 51}, "maxResults", id="integer-above-max"),
    pytest.param({"includeClosed": "true"}, "includeClosed", id="boolean-gets-string"),
    pytest.param({"includeClosed": 1}, "includeClosed", id="boolean-gets-number"),
    pytest.param({"query": "status=Open"}, "query", id="object-gets-string"),
    pytest.param({"query": ["status", "Open"]}, "query", id="object-gets-array"),
    pytest.param({"labels": "bug"}, "labels", id="string-array-gets-string"),
    pytest.param({"labels": ["bug", 3]}, "labels", id="string-array-gets-number-item"),
    pytest.param({"priority": "urgent"}, "priority", id="string-option-not-listed"),
    pytest.param({"region": "US East (N. Virginia)"}, "region", id="label-value-option-given-label"),
    pytest.param({"region": "ap-south-1"}, "region", id="label-value-option-not-listed"),
    pytest.param({"colour": "red"}, "colour", id="unknown-prop"),
    pytest.param({"project": "x" * (65 * 1024)}, "project", id="value-over-64kb"),
    pytest.param({"query": {"blob": "y" * (64 * 1024)}}, "query", id="object-over-64kb"),
    pytest.param({"timer": {"cron": "61 * * * *"}}, "timer", id="cron-minute-61"),
    pytest.param({"timer": {"cron": "every monday"}}, "timer", id="cron-not-an-expression"),
    pytest.param({"timer": {"intervalSeconds": 0}}, "timer", id="interval-zero"),
    pytest.param({"timer": {"intervalSeconds": -60}}, "timer", id="interval-negative"),
    pytest.param({"timer": {"intervalSeconds": 1.5}}, "timer", id="interval-not-integer"),
    pytest.param({"timer": {"intervalSeconds": "60"}}, "timer", id="interval-string"),
    pytest.param({"timer": {"cron": "0 9 * * *", "timezone": "Mars/Olympus_Mons"}}, "timer", id="bad-timezone"),
    pytest.param({"timer": 60}, "timer", id="timer-not-object"),
]


def tracker_props(override: dict[str, Any]) -> dict[str, Any]:
    props = {**TRACKER_VALID, **override}
    return {k: v for k, v in props.items() if v is not None}


@pytest.mark.parametrize(("override", "prop"), BAD_TRACKER_PROPS)
def test_create_rejects_invalid_prop(api: httpx.Client, override: dict, prop: str) -> None:
    r = api.post("/sources", json={"component_code": TRACKER, "configured_props": tracker_props(override)})
    assert_422(r, prop)
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 0


@pytest.mark.parametrize(("override", "prop"), BAD_TRACKER_PROPS)
def test_update_rejects_invalid_prop_and_keeps_source(api: httpx.Client, override: dict, prop: str) -> None:
    src = create(api, component_code=TRACKER, configured_props=TRACKER_VALID)
    r = api.put(f"/sources/{src['id']}", json={"configured_props": tracker_props(override)})
    assert_422(r, prop)
    assert api.get(f"/sources/{src['id']}").json()["data"] == src


# unknown and foreign ids


UNKNOWN = "dc_" + "x" * 24
ROUTES = [
    pytest.param("GET", "/sources/{id}", None, id="get"),
    pytest.param("PUT", "/sources/{id}", {"active": True}, id="put"),
    pytest.param("DELETE", "/sources/{id}", None, id="delete"),
    pytest.param("POST", "/sources/{id}/run", {"n": 1}, id="run"),
    pytest.param("GET", "/sources/{id}/event_summaries", None, id="event-summaries"),
    pytest.param("DELETE", "/sources/{id}/events", None, id="delete-events"),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
@pytest.mark.parametrize("source_id", [UNKNOWN, "not-an-id", "sc_" + "x" * 24])
def test_unknown_source_is_404(api: httpx.Client, method: str, path: str, body: Any, source_id: str) -> None:
    r = api.request(method, path.format(id=source_id), json=body)
    assert r.status_code == 404, r.text
    assert set(r.json()) == {"error"}


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_other_users_source_is_404(app: App, api: httpx.Client, method: str, path: str, body: Any) -> None:
    src = create(api, component_code=LIFECYCLE)
    stranger = app.client(tier="free")
    r = stranger.request(method, path.format(id=src["id"]), json=body)
    assert r.status_code == 404, r.text
    assert set(r.json()) == {"error"}
    assert stranger.get("/users/me/sources").json()["data"] == []
    # Untouched for its owner: still there, still active, no extra hooks ran.
    assert api.get(f"/sources/{src['id']}").json()["data"] == src
    assert hooks_seen(api, src["id"]) == ["deploy", "activate"]


# mistyped bodies


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": 5}, "name"),
        ({"active": "yes"}, "active"),
        ({"configured_props": []}, "configured_props"),
        ({"configured_props": "label=v2"}, "configured_props"),
        ({"component_code": 42}, "component_code"),
        ({"component_id": ["sc_x"]}, "component_id"),
    ],
    ids=["name-int", "active-string", "props-array", "props-string", "code-int", "id-array"],
)
def test_mistyped_body_is_400(api: httpx.Client, body: dict, field: str) -> None:
    r = api.post("/sources", json={"component_code": ECHO, **body})
    assert r.status_code == 400, r.text
    assert field in r.json()["details"]
    src = create(api, component_code=ECHO)
    r = api.put(f"/sources/{src['id']}", json=body)
    assert r.status_code == 400, r.text
    assert field in r.json()["details"]
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 1


def test_body_not_an_object_is_400(api: httpx.Client) -> None:
    r = api.post("/sources", json=["component_code"])
    assert r.status_code == 400, r.text
    r = api.post("/sources", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"] == "The request body is not valid JSON."


def test_no_component_reference_is_400(api: httpx.Client) -> None:
    # A missing required parameter is a 400 (DECISIONS), as for POST /components.
    for body in ({}, {"name": "x", "configured_props": {}}, {"component_code": None, "component_id": ""}):
        r = api.post("/sources", json=body)
        assert r.status_code == 400, (body, r.text)
        assert set(r.json()["details"]) == {"component_id"}
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 0


# props kept, replaced and given in their API form


def test_integer_bounds_are_inclusive(api: httpx.Client) -> None:
    for value in (1, 50):
        data = create(api, component_code=TRACKER, configured_props={**TRACKER_VALID, "maxResults": value})
        assert data["configured_props"]["maxResults"] == value


def test_update_configured_props_replace_all(api: httpx.Client) -> None:
    src = create(api, component_code=TRACKER,
                 configured_props={**TRACKER_VALID, "sortOrder": "asc", "assignee": "ada",
                                   "timer": {"intervalSeconds": 120}})
    assert src["configured_props"]["assignee"] == "ada"
    r = api.put(f"/sources/{src['id']}", json={"configured_props": TRACKER_VALID})
    assert r.status_code == 200, r.text
    props = r.json()["data"]["configured_props"]
    assert props["sortOrder"] == "desc"
    assert "assignee" not in props
    assert props["timer"] == {"cron": None, "interval_seconds": 900}
    assert api.get(f"/sources/{src['id']}").json()["data"]["configured_props"] == props


def test_update_without_configured_props_keeps_them(api: httpx.Client) -> None:
    src = create(api, component_code=TRACKER, configured_props={**TRACKER_VALID, "assignee": "ada"})
    r = api.put(f"/sources/{src['id']}", json={"name": "Eng issues"})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["configured_props"] == src["configured_props"]
    assert (data["name"], data["name_slug"]) == ("Eng issues", "eng-issues")


def test_cron_timer_response_form(api: httpx.Client) -> None:
    data = create(api, component_code=TRACKER,
                  configured_props={**TRACKER_VALID, "timer": {"cron": "*/15 * * * *", "timezone": "America/New_York"}})
    assert data["configured_props"]["timer"] == {"cron": "*/15 * * * *", "interval_seconds": 900}


# lifecycle hooks (lifecycle.mjs's hooks, in Python: each emits its name, its label and a call count)


def recording_hooks(instance: Instance, hook: str) -> RunResult:
    calls = instance.db.get("calls", 0) + 1
    return RunResult(emits=[Emit({"hook": hook, "label": instance.props.get("label"), "calls": calls},
                                 {"summary": f"{hook} hook"})], db_writes={"calls": calls})


def test_update_with_new_code_keeps_id(api: httpx.Client) -> None:
    src = create(api, component_code=LIFECYCLE)
    new_code = LIFECYCLE.replace("'version': '0.1.0'", "'version': '0.2.0'")
    assert new_code != LIFECYCLE
    r = api.put(f"/sources/{src['id']}", json={"component_code": new_code})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["id"] == src["id"]
    assert data["component_id"] != src["component_id"]
    assert api.get(f"/components/{data['component_id']}").json()["data"]["version"] == "0.2.0"
    assert hooks_seen(api, src["id"]) == ["deploy", "activate", "deactivate", "activate"]


def test_deactivate_and_reactivate(app: App, api: httpx.Client) -> None:
    app.world.runner.hooks = recording_hooks
    app.world.runner.script = lambda instance, event: RunResult(
        emits=[Emit({"run": event, "label": instance.props.get("label")}, {"summary": "manual run"})])
    src = create(api, component_code=LIFECYCLE)
    r = api.put(f"/sources/{src['id']}", json={"active": False})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["active"] is False
    assert api.get(f"/sources/{src['id']}").json()["data"]["active"] is False
    assert hooks_seen(api, src["id"]) == ["deploy", "activate", "deactivate"]

    r = api.post(f"/sources/{src['id']}/run", json={"n": 1})
    assert r.status_code == 409, r.text
    assert set(r.json()) == {"error"}

    r = api.put(f"/sources/{src['id']}", json={"active": True})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["active"] is True
    assert hooks_seen(api, src["id"]) == ["deploy", "activate", "deactivate", "activate"]
    assert api.post(f"/sources/{src['id']}/run", json={"n": 2}).status_code == 202
    app.world.queue.drain()
    r = api.get(f"/sources/{src['id']}/event_summaries", params={"expand": "event"})
    items = r.json()["data"]
    assert len(items) == 5 and items[0]["event"] == {"run": {"n": 2}, "label": "v1"}


def test_deploy_hook_that_throws_creates_nothing(app: App, api: httpx.Client) -> None:
    create(api, component_code=ECHO)
    app.world.runner.hooks = lambda instance, hook: RunResult(
        emits=[Emit({"attempted": True})], db_writes={"hookId": 42},
        error={"code": "RUNTIME_ERROR", "message": "GitHub rejected the webhook registration: 401 Bad credentials"})
    failing = repr({"name": "Repo Webhook", "version": "0.1.0", "type": "source", "key": "sources-api-failing-deploy",
                    "hooks": ["deploy"], "configurable_props": [{"name": "http", "type": "$.interface.http"},
                                                                {"name": "db", "type": "$.service.db"}]})
    r = api.post("/sources", json={"component_code": failing})
    assert r.status_code == 422, r.text
    assert "GitHub rejected the webhook registration: 401 Bad credentials" in r.json()["error"]
    page = api.get("/users/me/sources").json()
    assert page["page_info"]["total_count"] == 1
    assert [s["name"] for s in page["data"]] == ["my-source"]


# Moved from tests/e2e/test_sources_api.py: creating, naming, secrets' masks, wrong components, orgs
# and lists need no Node (describe's answer is a literal here); what runs the code stays there.

SIGNED = repr({
    "name": "Signed Deliveries", "version": "0.1.0", "type": "source", "key": "sources-api-signed-secret",
    "dedupe": None, "hooks": ["activate"], "has_additional_props": False,
    "configurable_props": [
        {"name": "db", "type": "$.service.db"},
        {"name": "signingSecret", "type": "string", "label": "Signing Secret", "secret": True},
        {"name": "channel", "type": "string", "label": "Channel", "optional": True, "default": "general"},
    ],
})
GITHUB_APP = repr({
    "name": "New Stars (GitHub)", "version": "0.3.0", "type": "source", "key": "sources-api-github-stars",
    "dedupe": None, "hooks": ["deploy"], "has_additional_props": False,
    "configurable_props": [
        {"name": "github", "type": "app", "app": "github"},
        {"name": "db", "type": "$.service.db"},
        {"name": "repo", "type": "string", "label": "Repository"},
    ],
})
ACTION = repr({"name": "Add Numbers", "version": "0.0.1", "type": "action", "key": "sources-api-add",
               "configurable_props": [{"name": "a", "type": "integer"}, {"name": "b", "type": "integer"}]})
MASK = "********"
SECRET = "whsec_9f8e7d6c5b4a39281706f5e4d3"


def echo(n: int = 0, name: str = "My Source") -> str:
    return repr({"name": name, "version": "0.0.1", "type": "source", "key": f"sources-api-echo-{n}",
                 "configurable_props": [{"name": "db", "type": "$.service.db"}]})


def test_create_by_component_code(app: App) -> None:
    api = app.client()
    me = api.get("/users/me").json()["data"]["id"]
    data = create(api, component_code=echo())
    assert set(data) == {"id", "user_id", "component_id", "configured_props", "active", "created_at",
                         "updated_at", "name", "name_slug", "expect_events_within", "catch_up"}
    assert data["id"].startswith("dc_") and len(data["id"]) >= 23
    assert data["component_id"].startswith("sc_")
    assert data["user_id"] == me
    assert data["active"] is True
    assert data["configured_props"] == {}
    assert data["name"] == "my-source" and data["name_slug"] == "my-source"
    assert data["created_at"] == data["updated_at"]
    saved = api.get(f"/components/{data['component_id']}").json()["data"]
    assert saved["name"] == "My Source"
    assert api.get(f"/sources/{data['id']}").json()["data"] == data


def test_create_by_saved_component_id(api: httpx.Client) -> None:
    saved = api.post("/components", json={"component_code": echo(1, "Orders Feed")}).json()["data"]
    data = create(api, component_id=saved["id"])
    assert data["component_id"] == saved["id"]
    assert data["name"] == "orders-feed"


def test_component_id_wins_over_component_code(api: httpx.Client) -> None:
    saved = api.post("/components", json={"component_code": echo(2, "Alpha Feed")}).json()["data"]
    data = create(api, component_id=saved["id"], component_code=echo(3, "Beta Feed"))
    assert data["component_id"] == saved["id"]
    assert data["name_slug"] == "alpha-feed"
    # The ignored code was not saved as a component either.
    assert [c["name"] for c in api.get("/users/me/components").json()["data"]] == ["Alpha Feed"]


def test_unknown_registry_key_is_404(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_key": "headwater-no-such-thing"})
    assert r.status_code == 404, r.text
    assert set(r.json()) == {"error"}


def test_name_defaults_to_unique_slug_and_explicit_name_is_kept(api: httpx.Client) -> None:
    names = [(d["name"], d["name_slug"]) for d in (create(api, component_code=echo()) for _ in range(3))]
    assert names == [("my-source", "my-source"), ("my-source-1", "my-source-1"), ("my-source-2", "my-source-2")]
    explicit = create(api, component_code=echo(), name="Orders Feed (EU)")
    assert explicit["name"] == "Orders Feed (EU)"
    assert explicit["name_slug"] == "orders-feed-eu"
    again = create(api, component_code=echo(), name="Orders Feed (EU)")
    assert again["name"] == "Orders Feed (EU)"
    assert again["name_slug"] == "orders-feed-eu-1"


def test_slugs_are_per_account(app: App, api: httpx.Client) -> None:
    create(api, component_code=echo())
    assert create(app.client(), component_code=echo())["name_slug"] == "my-source"


def test_create_inactive(app: App, api: httpx.Client) -> None:
    """Created inactive: its deploy hook runs, its activate hook only once it is activated (a
    webhook registered by activate is never registered twice without a deactivate between)."""
    app.world.runner.hooks = recording_hooks
    data = create(api, component_code=LIFECYCLE, active=False)
    assert data["active"] is False
    assert api.get(f"/sources/{data['id']}").json()["data"]["active"] is False
    assert hooks_seen(api, data["id"]) == ["deploy"]
    assert api.put(f"/sources/{data['id']}", json={"active": True}).status_code == 200
    assert hooks_seen(api, data["id"]) == ["deploy", "activate"]


def test_all_prop_problems_reported_at_once(api: httpx.Client) -> None:
    r = api.post("/sources", json={
        "component_code": TRACKER,
        "configured_props": {"maxResults": 99, "includeClosed": "no", "labels": "bug", "colour": "red"},
    })
    body = assert_422(r, "project", "maxResults", "includeClosed", "query", "labels", "priority", "region", "colour")
    assert body["details"]["project"] == ["is required"]


def test_defaults_of_optional_props_applied(api: httpx.Client) -> None:
    data = create(api, component_code=TRACKER, configured_props=TRACKER_VALID)
    assert data["configured_props"] == {**TRACKER_VALID, "timer": {"cron": None, "interval_seconds": 900},
                                        "sortOrder": "desc", "pageSize": 25}


def test_secret_prop_must_be_given(api: httpx.Client) -> None:
    assert_422(api.post("/sources", json={"component_code": SIGNED, "configured_props": {}}), "signingSecret")


def test_secret_masked_in_every_answer_and_kept_by_an_update_with_the_mask(app: App, api: httpx.Client) -> None:
    seen: list[Any] = []
    app.world.runner.hooks = lambda instance, hook: seen.append(instance.props["signingSecret"]) or RunResult()
    r = api.post("/sources", json={"component_code": SIGNED, "configured_props": {"signingSecret": SECRET}})
    assert r.status_code == 200 and SECRET not in r.text, r.text
    src = r.json()["data"]
    assert src["configured_props"] == {"signingSecret": MASK, "channel": "general"}
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"signingSecret": MASK, "channel": "alerts"}})
    assert r.status_code == 200 and SECRET not in r.text, r.text
    assert r.json()["data"]["configured_props"] == {"signingSecret": MASK, "channel": "alerts"}
    for text in (api.get(f"/sources/{src['id']}").text, api.get("/users/me/sources").text):
        assert SECRET not in text and MASK in text
    r = api.put(f"/sources/{src['id']}", json={"configured_props": {"signingSecret": "whsec_new"}})
    assert r.status_code == 200, r.text
    assert seen == [SECRET, SECRET, "whsec_new"]  # the hooks get the plaintext: kept, then replaced


def test_mask_on_create_is_not_a_stored_secret(app: App, api: httpx.Client) -> None:
    """On create there is nothing stored to keep: the mask is just the value given."""
    seen: list[Any] = []
    app.world.runner.hooks = lambda instance, hook: seen.append(instance.props["signingSecret"]) or RunResult()
    create(api, component_code=SIGNED, configured_props={"signingSecret": MASK})
    assert seen == [MASK]


@pytest.mark.parametrize(
    "github",
    [None, "tok", {"oauth_access_token": "tok"}, {"$auth": "tok"}],
    ids=["missing", "string", "no-auth-key", "auth-not-object"],
)
def test_app_prop_needs_auth_object(api: httpx.Client, github: Any) -> None:
    props: dict[str, Any] = {"repo": "octo/hello"}
    if github is not None:
        props["github"] = github
    assert_422(api.post("/sources", json={"component_code": GITHUB_APP, "configured_props": props}), "github")


def test_update_with_masked_app_auth_keeps_credentials(app: App, api: httpx.Client) -> None:
    """GET, change one prop, PUT back: the masked `$auth` must keep the stored credentials."""
    token = "gho_16C7e42F292c6912E7710c838347Ae178B4a"
    src = create(api, component_code=GITHUB_APP,
                 configured_props={"github": {"$auth": {"oauth_access_token": token}}, "repo": "octo/hello"})
    props = {**api.get(f"/sources/{src['id']}").json()["data"]["configured_props"], "repo": "octo/world"}
    assert props == {"github": {"$auth": MASK}, "repo": "octo/world"}
    seen: list[Any] = []
    app.world.runner.script = lambda instance, event: seen.append(instance.props["github"]) or RunResult()
    r = api.put(f"/sources/{src['id']}", json={"configured_props": props})
    assert r.status_code == 200 and token not in r.text, r.text
    assert api.post(f"/sources/{src['id']}/run", json={}).status_code == 202
    app.world.queue.drain()
    assert seen == [{"$auth": {"oauth_access_token": token}}]


def test_manual_run_with_bad_json_is_400(api: httpx.Client) -> None:
    data = create(api, component_code=echo())
    r = api.post(f"/sources/{data['id']}/run", content=b"{oops", headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text


def test_action_component_is_not_a_source(api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_code": ACTION, "configured_props": {"a": 1, "b": 2}})
    assert r.status_code == 422, r.text
    assert "not a source" in r.json()["error"]
    saved = api.post("/components", json={"component_code": ACTION}).json()["data"]
    r = api.post("/sources", json={"component_id": saved["id"], "configured_props": {"a": 1, "b": 2}})
    assert r.status_code == 422, r.text
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 0


def test_update_to_action_component_is_422(api: httpx.Client) -> None:
    src = create(api, component_code=LIFECYCLE)
    r = api.put(f"/sources/{src['id']}", json={"component_code": ACTION, "configured_props": {"a": 1, "b": 2}})
    assert r.status_code == 422, r.text
    assert api.get(f"/sources/{src['id']}").json()["data"] == src
    assert hooks_seen(api, src["id"]) == ["deploy", "activate"]


def test_unknown_or_foreign_component_id_is_404(app: App, api: httpx.Client) -> None:
    r = api.post("/sources", json={"component_id": "sc_" + "z" * 24})
    assert r.status_code == 404, r.text
    foreign = app.client().post("/components", json={"component_code": echo(9)}).json()["data"]
    r = api.post("/sources", json={"component_id": foreign["id"]})
    assert r.status_code == 404, r.text


def test_org_id_of_foreign_org_is_403(app: App, api: httpx.Client) -> None:
    owner = app.client().get("/users/me").json()["data"]["id"]
    org = app.world.services.accounts.create_org("Globex", owner)
    r = api.post("/sources", json={"component_code": echo()}, params={"org_id": org.id})
    assert r.status_code == 403, r.text
    assert set(r.json()) == {"error"}
    assert api.get("/users/me/sources").json()["page_info"]["total_count"] == 0


def test_list_twelve_sources_in_pages_of_five(api: httpx.Client) -> None:
    ids = [create(api, component_code=echo())["id"] for _ in range(12)]
    newest_first = ids[::-1]

    pages, cursor = [], None
    while True:
        body = api.get("/users/me/sources", params={"limit": 5, **({"after": cursor} if cursor else {})}).json()
        assert body["page_info"]["total_count"] == 12
        assert body["page_info"]["count"] == len(body["data"])
        if not body["data"]:
            break
        assert body["page_info"]["start_cursor"] and body["page_info"]["end_cursor"]
        pages.append([s["id"] for s in body["data"]])
        cursor = body["page_info"]["end_cursor"]
    assert [len(p) for p in pages] == [5, 5, 2]
    assert sum(pages, []) == newest_first

    back: list[str] = []
    body = api.get("/users/me/sources", params={"limit": 5, "before": cursor}).json()
    while body["data"]:
        assert len(body["data"]) <= 5
        back = [s["id"] for s in body["data"]] + back
        body = api.get("/users/me/sources", params={"limit": 5, "before": body["page_info"]["start_cursor"]}).json()
    assert back == newest_first[:-1]

    default = api.get("/users/me/sources/").json()
    assert [s["id"] for s in default["data"]] == newest_first[:10]
    assert all(set(s) >= {"id", "user_id", "component_id", "configured_props", "active", "name", "name_slug"}
               for s in default["data"])
    for bad in ({"limit": 0}, {"limit": 101}, {"after": "garbage!"}):
        assert api.get("/users/me/sources", params=bad).status_code == 400, bad


def test_org_sources_for_members_and_403_for_others(app: App) -> None:
    owner, member, outsider = app.client(), app.client(), app.client()
    accounts = app.world.services.accounts
    org = accounts.create_org("Initech", owner.get("/users/me").json()["data"]["id"])
    accounts.add_member(org.id, member.get("/users/me").json()["data"]["id"])
    made = [owner.post("/sources", params={"org_id": org.id}, json={"component_code": echo()}).json()["data"]["id"]
            for _ in range(3)]
    personal = create(owner, component_code=echo())
    assert personal["name_slug"] == "my-source"  # slugs are per namespace
    body = member.get(f"/orgs/{org.id}/sources").json()
    assert [s["id"] for s in body["data"]] == made[::-1]
    assert body["page_info"]["total_count"] == 3
    assert member.get(f"/workspaces/{org.id}/sources").json() == body
    page = member.get(f"/orgs/{org.id}/sources", params={"limit": 2}).json()
    assert [s["id"] for s in page["data"]] == made[:0:-1]
    assert member.get(f"/sources/{made[0]}").json()["data"]["id"] == made[0]
    assert member.get(f"/sources/{personal['id']}").status_code == 404
    created = member.post("/sources", params={"org_id": org.id}, json={"component_code": echo()}).json()["data"]
    assert created["name_slug"] == "my-source-3"
    r = outsider.get(f"/orgs/{org.id}/sources")
    assert r.status_code == 403, r.text
    assert set(r.json()) == {"error"}
    assert outsider.get(f"/sources/{made[0]}").status_code == 404
    assert outsider.get(f"/orgs/o_{'q' * 24}/sources").status_code in (403, 404)
