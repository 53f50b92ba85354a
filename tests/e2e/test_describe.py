"""Describe: component code posted to the service comes back with the exact
normalized `configurable_props` of docs/runner-protocol.md ("describe")."""

import re
from pathlib import Path

import httpx
import pytest

COMPONENTS = Path(__file__).parents[1] / "components"
BAD = COMPONENTS / "bad"
MULTI = COMPONENTS / "multi"

# Bundling may install npm packages; loading a looping module waits for the
# runner's time limit. Both take longer than httpx's default of 5 s.
SLOW = httpx.Timeout(180.0)


def timer(**default):
    return {"name": "timer", "type": "$.interface.timer", "default": default}


GOOD = [
    (
        "http_custom_response.mjs",
        {
            "key": "test-http-custom-response",
            "name": "HTTP Webhook with Custom Response",
            "version": "0.0.3",
            "type": "source",
            "configurable_props": [
                {"name": "http", "type": "$.interface.http", "customResponse": True},
                {"name": "db", "type": "$.service.db"},
            ],
        },
    ),
    (
        "cjs_interval_timer.js",
        {
            "key": "test-cjs-uptime-check",
            "name": "Uptime Check",
            "version": "0.1.2",
            "type": "source",
            "configurable_props": [
                timer(intervalSeconds=300),
                {
                    "name": "url",
                    "type": "string",
                    "label": "URL",
                    "description": "The address to check",
                },
            ],
        },
    ),
    (
        "timer_cron.mjs",
        {
            "key": "test-cron-digest",
            "name": "Weekday Morning Digest",
            "version": "1.0.0",
            "type": "source",
            "configurable_props": [
                {
                    "name": "timer",
                    "type": "$.interface.timer",
                    "label": "Schedule",
                    "default": {"cron": "0 9 * * 1-5"},
                },
                {
                    "name": "recipients",
                    "type": "string[]",
                    "label": "Recipients",
                    "description": "Email addresses that should receive the digest",
                },
            ],
        },
    ),
    (
        "timer_no_run.mjs",
        {
            "key": "test-heartbeat",
            "name": "Heartbeat",
            "version": "0.0.1",
            "type": "source",
            "configurable_props": [timer(intervalSeconds=600)],
        },
    ),
    (
        "npm_pinned.mjs",
        {
            "key": "test-npm-extract-field",
            "name": "Extract Nested Field",
            "version": "0.2.0",
            "type": "action",
            "configurable_props": [
                {"name": "payload", "type": "object", "label": "Payload"},
                {
                    "name": "path",
                    "type": "string",
                    "label": "Path",
                    "description": "Dot path of the value, e.g. `user.address.city` or `items[0].sku`",
                },
                {
                    "name": "fallback",
                    "type": "string",
                    "label": "Fallback",
                    "optional": True,
                    "default": "unknown",
                },
            ],
        },
    ),
    (
        "platform_axios.mjs",
        {
            "key": "test-platform-list-issues",
            "name": "List Repository Issues",
            "version": "0.4.0",
            "type": "action",
            "configurable_props": [
                {
                    "name": "repository",
                    "type": "string",
                    "label": "Repository",
                    "description": "Full name of the repository, e.g. `nodejs/node`",
                },
                {
                    "name": "labels",
                    "type": "string",
                    "label": "Labels",
                    "description": "Comma-separated list of label names",
                    "optional": True,
                },
            ],
        },
    ),
    (
        "typescript_source.ts",
        {
            "key": "test-ts-new-order",
            "name": "New Order (TypeScript)",
            "version": "0.0.1",
            "type": "source",
            "configurable_props": [
                # customResponse: false is left out; default 0 is a value and is kept.
                {"name": "http", "type": "$.interface.http"},
                {
                    "name": "minimumTotal",
                    "type": "integer",
                    "label": "Minimum Total",
                    "description": "Ignore orders below this amount, in cents",
                    "optional": True,
                    "default": 0,
                },
            ],
        },
    ),
    (
        "app_props.mjs",
        {
            "key": "test-app-slack-send-message",
            "name": "Send Message",
            "version": "0.3.1",
            "type": "action",
            "configurable_props": [
                {"name": "slack", "type": "app", "app": "slack"},
                {
                    "name": "conversation",
                    "type": "string",
                    "label": "Channel",
                    "description": "Select a public or private channel",
                    "remoteOptions": True,
                    "useQuery": True,
                },
                {
                    "name": "text",
                    "type": "string",
                    "label": "Text",
                    "description": "Text of the message; Slack `mrkdwn` is supported",
                },
                {
                    "name": "unfurlLinks",
                    "type": "boolean",
                    "label": "Unfurl Links",
                    "optional": True,
                    "default": False,
                },
            ],
        },
    ),
    (
        "static_options.mjs",
        {
            "key": "test-format-date",
            "name": "Format Date",
            "version": "0.0.4",
            "type": "action",
            "configurable_props": [
                {
                    "name": "date",
                    "type": "string",
                    "label": "Date",
                    "description": "A date in ISO 8601 form, e.g. `2024-03-01T12:00:00Z`",
                },
                {
                    "name": "format",
                    "type": "string",
                    "label": "Output Format",
                    "optional": True,
                    "default": "iso",
                    "options": ["iso", "unix", "utc", "locale"],
                },
                {
                    "name": "timeZone",
                    "type": "string",
                    "label": "Time Zone",
                    "optional": True,
                    "default": "UTC",
                    "options": [
                        {"label": "UTC", "value": "UTC"},
                        {"label": "New York", "value": "America/New_York"},
                        {"label": "Berlin", "value": "Europe/Berlin"},
                    ],
                },
            ],
        },
    ),
    (
        "integer_bounds.mjs",
        {
            "key": "test-random-integers",
            "name": "Generate Random Integers",
            "version": "0.1.0",
            "type": "action",
            "configurable_props": [
                {
                    "name": "count",
                    "type": "integer",
                    "label": "Count",
                    "description": "How many numbers to generate",
                    "optional": True,
                    "default": 5,
                    "min": 1,
                    "max": 100,
                },
                # min: 0 is a value and is kept.
                {"name": "lowest", "type": "integer", "label": "Lowest", "min": 0},
                {"name": "highest", "type": "integer", "label": "Highest", "max": 1000000},
            ],
        },
    ),
    (
        "secret_and_arrays.mjs",
        {
            "key": "test-signed-webhook",
            "name": "New Signed Webhook Delivery",
            "version": "0.2.3",
            "type": "source",
            "configurable_props": [
                {"name": "http", "type": "$.interface.http"},
                {
                    "name": "signingSecret",
                    "type": "string",
                    "label": "Signing Secret",
                    "description": "The secret shared with the sender",
                    "secret": True,
                },
                {
                    "name": "signatureHeader",
                    "type": "string",
                    "label": "Signature Header",
                    "optional": True,
                    "default": "x-hub-signature-256",
                },
                {
                    "name": "events",
                    "type": "string[]",
                    "label": "Events",
                    "description": "Only emit deliveries of these event types",
                    "optional": True,
                    "default": ["push", "release"],
                },
            ],
        },
    ),
    (
        "reload_props.mjs",
        {
            "key": "test-create-crm-record",
            "name": "Create CRM Record",
            "version": "0.1.0",
            "type": "action",
            "configurable_props": [
                {
                    "name": "info",
                    "type": "alert",
                    "alertType": "info",
                    "content": "Pick a record type to see its fields.",
                },
                {
                    "name": "recordType",
                    "type": "string",
                    "label": "Record Type",
                    "options": ["contact", "company"],
                    "reloadProps": True,
                },
            ],
        },
    ),
    (
        "action_export.mjs",
        {
            "key": "test-parse-json",
            "name": "Parse JSON",
            "version": "0.0.2",
            "type": "action",
            "configurable_props": [
                {
                    "name": "text",
                    "type": "string",
                    "label": "JSON Text",
                    "description": "The JSON document to parse",
                },
            ],
        },
    ),
    (
        "dedupe_hooks.mjs",
        {
            "key": "test-stripe-new-event",
            "name": "New Stripe Event (Instant)",
            "version": "0.1.5",
            "type": "source",
            "configurable_props": [
                {"name": "http", "type": "$.interface.http"},
                {"name": "db", "type": "$.service.db"},
                {
                    "name": "apiKey",
                    "type": "string",
                    "label": "Secret Key",
                    "description": "A Stripe secret key, e.g. `sk_live_...`",
                    "secret": True,
                },
                {
                    "name": "enabledEvents",
                    "type": "string[]",
                    "label": "Events",
                    "description": "Event types to listen for, or `*` for all",
                    "optional": True,
                    "default": ["*"],
                },
            ],
        },
    ),
]

MULTI_EXPECTED = {
    "key": "github-new-commit",
    "name": "New Commit",
    "version": "0.2.1",
    "type": "source",
    "configurable_props": [
        {"name": "github", "type": "app", "app": "github"},
        {"name": "db", "type": "$.service.db"},
        timer(intervalSeconds=900),
        {
            "name": "repo",
            "type": "string",
            "label": "Repository",
            "description": "The repository to watch, as `owner/name`",
            "remoteOptions": True,
        },
        {
            "name": "branch",
            "type": "string",
            "label": "Branch",
            "description": "Defaults to the repository's default branch",
            "optional": True,
        },
    ],
}

# (file, substrings the error message must contain, case-insensitive;
#  a compiled pattern is searched instead)
BAD_CASES = [
    ("syntax_error.mjs", [re.compile(r"\b8:\d+"), 'expected "}"']),
    ("missing_run.mjs", ["run"]),
    ("throws_on_import.mjs", ['Unknown Mailgun region "ap"']),
    ("loops_on_import.mjs", ["time"]),
    ("invalid_prop_type.mjs", ["amount", "number"]),
    ("unknown_prop_definition.mjs", ["tableId"]),
]


def assert_described(data, expected):
    for field in ("key", "name", "version", "type"):
        assert data.get(field) == expected[field], field
    props = data["configurable_props"]
    assert props == expected["configurable_props"]
    # The protocol fixes the order of the keys in each prop, too.
    assert [list(p) for p in props] == [list(p) for p in expected["configurable_props"]]


def test_fixture_lists_are_complete():
    on_disk = sorted(p.name for p in COMPONENTS.iterdir() if p.is_file())
    assert on_disk == sorted(name for name, _ in GOOD)
    assert sorted(p.name for p in BAD.iterdir()) == sorted(name for name, _ in BAD_CASES)


@pytest.mark.parametrize(("filename", "expected"), GOOD, ids=[name for name, _ in GOOD])
def test_describe_component(api, filename, expected):
    code = (COMPONENTS / filename).read_text()
    resp = api.post("/components", json={"component_code": code}, timeout=SLOW)
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert data["id"].startswith("sc_")
    assert data["code"] == code
    assert data["code_hash"]
    assert isinstance(data["created_at"], int)
    assert isinstance(data["updated_at"], int)
    assert_described(data, expected)


def test_same_code_same_hash(api):
    code = (COMPONENTS / "action_export.mjs").read_text()
    first = api.post("/components", json={"component_code": code}, timeout=SLOW)
    second = api.post("/components", json={"component_code": code}, timeout=SLOW)
    assert first.status_code == second.status_code == 200
    assert first.json()["data"]["code_hash"] == second.json()["data"]["code_hash"]
    assert first.json()["data"]["configurable_props"] == second.json()["data"]["configurable_props"]


def test_multi_file_component_published_to_registry(server, api):
    server.cli("registry", "publish", str(MULTI))
    resp = api.get(f"/components/registry/{MULTI_EXPECTED['key']}", timeout=SLOW)
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert data["id"].startswith("sc_")
    assert_described(data, MULTI_EXPECTED)
    # The published code is one file: the relative imports were resolved.
    assert "./app.mjs" not in data["code"]
    assert "./common.mjs" not in data["code"]


@pytest.mark.parametrize(("filename", "needles"), BAD_CASES, ids=[name for name, _ in BAD_CASES])
def test_bad_component_is_rejected(server, api, filename, needles):
    code = (BAD / filename).read_text()
    resp = api.post("/components", json={"component_code": code}, timeout=SLOW)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert "data" not in body
    message = body["error"]
    assert isinstance(message, str) and message
    for needle in needles:
        if isinstance(needle, re.Pattern):
            assert needle.search(message), (needle.pattern, message)
        else:
            assert needle.lower() in message.lower(), (needle, message)
    # No stack traces in error bodies (DECISIONS "HTTP basics").
    assert "\n    at " not in resp.text
    health = httpx.get(f"{server.base_url}/healthz", timeout=10)
    assert health.status_code == 200


def test_service_still_describes_after_bad_components(api):
    code = (COMPONENTS / "timer_no_run.mjs").read_text()
    resp = api.post("/components", json={"component_code": code}, timeout=SLOW)
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["configurable_props"] == [timer(intervalSeconds=600)]


def test_app_specific_prop_types_of_registry_components_load(api):
    code = """export default {
      name: "New Airtable Record", version: "0.0.1", key: "airtable-new-record",
      props: {
        airtable: { type: "app", app: "airtable_oauth" },
        baseId: { type: "$.airtable.baseId", appProp: "airtable" },
        tables: { type: "$.airtable.tableId[]", label: "Tables" },
      },
      async run() {},
    };"""
    resp = api.post("/components", json={"component_code": code}, timeout=SLOW)
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["configurable_props"] == [
        {"name": "airtable", "type": "app", "app": "airtable_oauth"},
        {"name": "baseId", "type": "$.airtable.baseId"},
        {"name": "tables", "type": "$.airtable.tableId[]", "label": "Tables"},
    ]


def test_a_prop_given_as_its_type_alone_is_that_type(api):
    code = """export default {
      name: "Create Document", version: "0.1.2", type: "action",
      props: { title: "string", ids: "integer[]", sheet: "app" },
      async run() { return this.title },
    };"""
    resp = api.post("/components", json={"component_code": code}, timeout=SLOW)
    assert resp.status_code == 422, resp.text
    assert 'prop "sheet": "app" is not a known prop shorthand' in resp.json()["error"]
    resp = api.post("/components", json={"component_code": code.replace(', sheet: "app"', "")}, timeout=SLOW)
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["configurable_props"] == [
        {"name": "title", "type": "string"}, {"name": "ids", "type": "integer[]"}]
