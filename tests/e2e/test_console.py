"""The console in a real browser (Playwright driving Debian's Chromium): sign in, deploy the HTTP
source from the registry with the generated form, send it a request, watch the event arrive
without reloading and inspect it, see a thrown error on the errors pane; a source's configuration
(secrets masked, never in the page), edit and re-deploy, pause and resume, a timer's schedule,
subscriptions; the runs panel (a run in full, re-run, older pages, a run listed as its event
arrives); webhook pages with their deliveries labelled; the registry browser; every page on
a phone. A screenshot of each page is saved under tests/artifacts/console/."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.conftest import Server, User, client_for, new_user
from tests.e2e.test_run_records import wait_runs

ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "console"
CHROMIUM = "/usr/bin/chromium"
THROWER = """export default {
  name: "Console thrower", version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { throw new Error("console saw this: " + event.body.why); },
};"""

SECRETS = """export default {
  name: "Console secrets", version: "0.0.1",
  props: {
    token: { type: "string", secret: true, label: "API token", description: "Sent as a bearer token" },
    pageSize: { type: "integer", label: "Page size", description: "Items per request", min: 1, max: 50 },
    http: "$.interface.http",
  },
  async run() {
    const kept = [...this.token].reverse().join("") === "eulav-t3rc3s";
    this.$emit({}, { summary: `token kept: ${kept}, page size ${this.pageSize}` });
  },
};"""
SECRET = "s3cr3t-value"
KEYED_SOURCE = """export default {
  name: "console-keyed", version: "0.0.1",
  props: { keyed: { type: "app", app: "keyed_app" }, http: "$.interface.http" },
  async run() { this.$emit({ fields: Object.keys(this.keyed.$auth) }) },
};"""
RECORDED = """export default {
  name: "Console recorded", version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    console.log(`got ${event.body.n} <img src=x onerror="window.pwned=1">`);
    this.db.set("last", event.body.n);
    this.$emit({ n: event.body.n }, { summary: `n ${event.body.n}` });
    if (event.body.fail) throw new Error("failed on purpose <b>bold</b>");
  },
};"""
RESPONDER = """export default {
  name: "Console responder", version: "0.0.1",
  props: { http: { type: "$.interface.http", customResponse: true } },
  async run(event) { await this.http.respond({ status: 201, body: "made" }); },
};"""
STATEFUL = """export default {
  name: "Console state", version: "0.0.1",
  props: { http: "$.interface.http", db: "$.service.db" },
  async run(event) {
    this.db.set("count", (this.db.get("count") ?? 0) + 1);
    this.db.set("html", '<img src=x onerror="window.pwned=1">');
  },
};"""
NOOP = """export default { name: "Console noop", version: "0.0.1", type: "action", props: {}, run() { return 1; } };"""


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver: /ok answers 200, /flaky 500 (retried), /gone 410 (never again)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response({"/ok": 200, "/flaky": 500, "/gone": 410}.get("/" + self.path.split("/")[1], 404))
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    faults: list[str] = []
    page.on("pageerror", lambda e: faults.append(str(e)))
    yield page
    context.close()
    assert faults == [], f"the console threw: {faults}"


@pytest.fixture(scope="module")
def person(server: Server) -> User:
    return new_user(server, tier="paid")


@pytest.fixture(scope="module")
def client(server: Server, person: User) -> Iterator[httpx.Client]:
    with client_for(server, person.api_key) as c:
        yield c


def deploy(client: httpx.Client, **body: Any) -> dict[str, Any]:
    r = client.post("/sources/", json=body)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def sign_in(page: Page, server: Server, person: User) -> None:
    page.goto(server.base_url + "/console")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    shot(page, "1-sign-in")
    page.get_by_label("API key").fill(person.api_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Sources", exact=True)).to_be_visible()


def test_deploy_from_the_registry_and_watch_events_arrive(page: Page, server: Server, person: User) -> None:
    sign_in(page, server, person)
    shot(page, "2-sources")
    page.get_by_role("navigation").get_by_role("link", name="Deploy").click()
    page.get_by_label("From the registry").select_option("headwater-http")
    page.get_by_role("button", name="Use it").click()
    expect(page.get_by_role("heading", name="Configure New Requests")).to_be_visible()
    page.get_by_label("Source name").fill("console-http")
    shot(page, "3-deploy-form")
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.get_by_role("heading", name="console-http")).to_be_visible()
    endpoint = page.locator("#endpoint").inner_text()
    events = page.get_by_role("list", name="Events")
    expect(events.locator("li")).to_have_count(0)

    assert httpx.post(endpoint + "/orders", json={"order": 42}).status_code == 200
    item = events.locator("li").first
    expect(item).to_contain_text("POST /orders")  # its summary, arrived live: the page was not reloaded
    assert item.locator("time").inner_text().strip()  # and its time, readable
    item.click()
    inspector = page.locator("#event-tree")
    expect(inspector.get_by_text("order:")).to_be_visible()
    expect(inspector.get_by_text("content-type:")).to_be_hidden()  # the headers folded away...
    inspector.get_by_text("headers", exact=True).click()
    expect(inspector.get_by_text("content-type:")).to_be_visible()  # ...open on a click
    shown = json.loads(page.locator("#event-json").text_content() or "")
    assert shown["event"]["body"] == {"order": 42} and shown["metadata"]["emitter_id"].startswith("dc_")
    shot(page, "4-source-live-event")

    page.get_by_role("navigation").get_by_role("link", name="Usage").click()
    expect(page.locator("#usage")).to_contain_text("billing_period_invocations")
    shot(page, "5-usage")


def test_a_thrown_error_shows_on_the_errors_pane(page: Page, server: Server, person: User) -> None:
    sign_in(page, server, person)
    page.get_by_role("navigation").get_by_role("link", name="Deploy").click()
    page.get_by_label("…or paste component code").fill(THROWER)
    page.get_by_role("button", name="Load its props").click()
    page.get_by_role("button", name="Deploy", exact=True).click()
    endpoint = page.locator("#endpoint").inner_text()
    httpx.post(endpoint, json={"why": "testing"})
    errors = page.get_by_role("list", name="Errors")
    expect(errors.locator("li").first).to_contain_text("RUNTIME_ERROR: console saw this: testing")
    errors.locator("li").first.click()
    assert json.loads(page.locator("#event-json").text_content() or "")["event"]["error"]["code"] == "RUNTIME_ERROR"
    shot(page, "6-errors")
    page.get_by_label("Event (JSON)").fill('{"body": {"why": "by hand"}}')
    page.get_by_role("button", name="Run", exact=True).click()
    expect(errors.locator("li")).to_have_count(2)


def test_the_runs_panel_lists_a_run_shows_it_in_full_and_reruns_it(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    source = deploy(client, component_code=RECORDED, name="console-runs")
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    runs = page.get_by_role("table", name="Runs", exact=True).locator("tbody tr")
    page.get_by_label("Event (JSON)").fill('{"body": {"n": 7}}')
    page.get_by_role("button", name="Run", exact=True).click()
    expect(runs.filter(has_text="manual")).to_have_count(1)  # the list looked again until the run was on record
    manual_id = runs.filter(has_text="manual").get_attribute("data-id")
    manual = page.locator(f'#runs-table tr[data-id="{manual_id}"]')
    expect(manual).to_contain_text("success")
    expect(manual).to_contain_text("events 1")
    # the health, drawn again with the new run: 1 run, 1 event, no error, no skipped tick
    last_hour = page.locator("#health-counts").get_by_role("row", name="Last hour")
    expect(last_hour.locator("td")).to_have_text(["1", "1", "0", "0"])
    manual.click()
    detail = page.locator("#run-detail")
    expect(detail.locator("#run-trigger")).to_contain_text("n: 7")
    expect(detail.locator("#run-logs")).to_contain_text('log: got 7 <img src=x onerror="window.pwned=1">')
    expect(detail.locator("#run-db-keys")).to_have_text("last")
    assert detail.locator("img").count() == 0 and not page.evaluate("window.pwned")  # the log line is text
    shot(page, "19-runs-detail")

    page.get_by_label("Event (JSON)").fill('{"body": {"n": 8, "fail": true}}')
    page.get_by_role("button", name="Run", exact=True).click()
    failed = runs.filter(has_text="error")
    expect(failed).to_contain_text("RUNTIME_ERROR: failed on purpose <b>bold</b>")
    failed.get_by_role("button").click()
    expect(detail.locator("#run-error")).to_contain_text("failed on purpose <b>bold</b>")
    expect(detail.locator("#run-error pre")).to_contain_text("Error: failed on purpose")  # its stack
    assert detail.locator("b").count() == 0

    manual.click()
    expect(detail.get_by_role("heading", level=3)).to_contain_text(f"Run {manual_id}")
    detail.get_by_role("button", name="Re-run").click()
    rerun = runs.filter(has_text="rerun")
    expect(rerun).to_have_count(1)
    expect(rerun).to_contain_text(f"of {manual_id}")
    rerun.click()
    expect(detail.locator("#run-trigger")).to_contain_text("n: 7")  # the same input
    shot(page, "20-runs-rerun")

    assert client.put(f"/sources/{source['id']}", json={"active": False}).status_code == 200
    detail.get_by_role("button", name="Re-run").click()  # refused: the source is paused (409, said)
    expect(page.locator("#status .error")).to_contain_text(f"Source {source['id']} is inactive; activate it to run it.")
    assert client.get(f"/sources/{source['id']}/runs").json()["data"][0]["kind"] == "rerun"


def test_the_runs_panel_pages_back_and_shows_a_request_that_arrives_live(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    source = deploy(client, component_code=RECORDED, name="console-many-runs")
    path = f"/sources/{source['id']}"
    for n in range(21):
        assert client.post(f"{path}/run", json={"body": {"n": n}}).status_code == 202
    wait_runs(client, path, lambda runs: len(runs) == 21, "21 runs on record")
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    runs = page.get_by_role("table", name="Runs", exact=True).locator("tbody tr")
    expect(runs).to_have_count(20)  # a page of them, the newest first
    page.get_by_role("button", name="Older runs").click()
    expect(runs).to_have_count(21)
    expect(page.get_by_role("button", name="Older runs")).to_be_hidden()
    assert httpx.post(source["configured_props"]["http"]["endpoint_url"], json={"n": 99}).status_code == 200
    expect(runs.first).to_contain_text("http")  # its run, listed as its event arrived: no reload, no click
    expect(runs).to_have_count(22)  # added above the older pages, which stay
    runs.first.click()
    expect(page.locator("#run-trigger")).to_contain_text("n: 99")

    responder = deploy(client, component_code=RESPONDER, name="console-responder")
    page.goto(f"{server.base_url}/console/#/sources/{responder['id']}")
    expect(page.locator("#no-runs")).to_be_visible()
    assert httpx.post(responder["configured_props"]["http"]["endpoint_url"], json={}).status_code == 201
    # answered before its run is committed, and it emitted nothing (no live event to list it by)
    wait_runs(client, f"/sources/{responder['id']}", lambda runs: len(runs) == 1, "the responder's run")
    page.get_by_role("button", name="Refresh").click()
    runs.first.click()
    expect(page.locator("#run-detail").get_by_role("row", name="Response status")).to_contain_text("201")


def wait_health(client: httpx.Client, source_id: str, done: Any, what: str) -> dict[str, Any]:
    """The source's health once `done(health)` (polled: a stall is marked by a check every few seconds)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        health = client.get(f"/sources/{source_id}/health").json()["data"]
        if done(health):
            return health
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: {health}")


def test_health_at_a_glance_numbers_chart_badges_and_the_expectation_set_in_the_edit_form(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    source = deploy(client, component_code=RECORDED, name="console-health")
    path = f"/sources/{source['id']}"
    for body in ({"n": 1}, {"n": 2}, {"n": 3, "fail": True}):
        assert client.post(f"{path}/run", json={"body": body}).status_code == 202
    wait_runs(client, path, lambda runs: len(runs) == 3, "three runs on record")
    health = wait_health(client, source["id"], lambda h: h["last_hour"]["runs"] == 3, "three runs counted")
    assert health["last_hour"]["errors"] == 1 and health["last_hour"]["events"] >= 2
    paused = deploy(client, component_key="headwater-http", name="console-health-paused", active=False)
    quiet = deploy(client, component_key="headwater-http", name="console-health-quiet")
    silent = deploy(client, component_key="headwater-http", name="console-health-silent", expect_events_within=1)
    wait_health(client, silent["id"], lambda h: h["stalled"], "the silent source's stall")

    sign_in(page, server, person)
    listed = page.get_by_role("table", name="Your sources")
    for s, status in ((source, "erroring"), (paused, "paused"), (quiet, "ok"), (silent, "stalled")):
        expect(listed.locator(f'tr[data-id="{s["id"]}"] .badge')).to_have_text(status)
    shot(page, "21-sources-health")

    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    section = page.locator("#health")
    expect(section.locator("#health-status")).to_have_text("erroring")
    hour = section.get_by_role("row", name="Last hour")
    expect(hour.locator("td")).to_have_text(["3", str(health["last_hour"]["events"]), "1", "0"])
    chart = section.locator("svg.chart")
    expect(chart.locator("title").first).to_have_text("Runs, events and errors, last hour")
    expect(chart.locator("rect.bar.errors")).not_to_have_count(0)
    ran = sum(int(t.split(": ")[1].split(" ")[0]) for t in chart.locator("rect.bar.runs title").all_text_contents())
    assert ran == 3  # the bars add up to the runs counted
    expect(section.get_by_text("Expects an event within")).to_be_visible()
    expect(section.locator("#health-facts")).to_contain_text("no expectation")
    shot(page, "22-source-health")
    section.get_by_role("button", name="Last day").click()
    expect(section.get_by_role("button", name="Last day")).to_have_attribute("aria-pressed", "true")
    expect(chart.locator("title").first).to_have_text("Runs, events and errors, last day")
    ran = sum(int(t.split(": ")[1].split(" ")[0]) for t in chart.locator("rect.bar.runs title").all_text_contents())
    assert ran == 3
    expect(chart.locator("text.tick")).to_contain_text(["0", "2", "4"])  # whole numbers on the y axis
    section.screenshot(path=str(ARTIFACTS / "23-source-health-day.png"))

    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Expect an event within (seconds)").fill("3600")
    page.get_by_role("button", name="Save and re-deploy").click()
    expect(page.locator("#health-facts")).to_contain_text("1 hour")
    assert client.get(path).json()["data"]["expect_events_within"] == 3600
    page.get_by_role("button", name="Edit").click()
    expect(page.get_by_label("Expect an event within (seconds)")).to_have_value("3600")
    page.get_by_label("Expect an event within (seconds)").fill("")
    page.get_by_role("button", name="Save and re-deploy").click()
    expect(page.locator("#health-facts")).to_contain_text("no expectation")
    assert client.get(path).json()["data"]["expect_events_within"] is None

    page.goto(f"{server.base_url}/console/#/sources/{silent['id']}")
    expect(page.locator("#health-status")).to_have_text("stalled")
    expect(page.locator("#stall")).to_contain_text("emitted no event within the time expected")
    page.locator("h2").evaluate("(h) => { h.dataset.drawn = 'once'; }")  # gone if the page were drawn again
    assert client.put(f"/sources/{silent['id']}", json={"expect_events_within": None}).status_code == 200
    # the expectation cleared ends the stall: its SOURCE_RECOVERED arrives live and the health is drawn again
    expect(page.locator("#errors-list")).to_contain_text("SOURCE_RECOVERED")
    expect(page.locator("#health-status")).to_have_text("ok")
    expect(page.locator("#stall")).to_have_count(0)
    expect(page.locator("h2")).to_have_attribute("data-drawn", "once")


def test_webhooks_page_creates_one_and_shows_its_secret_once(page: Page, server: Server, person: User) -> None:
    sign_in(page, server, person)
    page.get_by_role("navigation").get_by_role("link", name="Webhooks").click()
    page.get_by_label("URL").fill("http://127.0.0.1:9/hook")
    page.get_by_role("button", name="Create webhook").click()
    expect(page.get_by_text("Signing secret (shown once)")).to_be_visible()
    shot(page, "7-webhooks")


def test_accounts_page_connects_lists_without_values_and_deletes(page: Page, server: Server, person: User) -> None:
    secret = "sk-console-" + person.id
    sign_in(page, server, person)
    page.get_by_role("navigation").get_by_role("link", name="Accounts").click()
    page.get_by_label("App").fill("keyed_app")
    page.get_by_label("Name").fill("Console keys")
    page.get_by_label("Credentials").fill(json.dumps({"api_key": secret}))
    page.get_by_role("button", name="Connect account").click()
    row = page.locator("#accounts tbody tr").filter(has_text="Console keys")
    expect(row).to_contain_text("keyed_app")
    expect(row).to_contain_text("api_key")
    assert secret not in page.content()
    shot(page, "12-accounts")
    account_id = row.locator("code").inner_text()

    page.get_by_role("navigation").get_by_role("link", name="Deploy").click()  # the deploy form offers it
    page.get_by_label("…or paste component code").fill(KEYED_SOURCE)
    page.get_by_role("button", name="Load its props").click()
    page.get_by_label("keyed: connected account").select_option(account_id)
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.locator("#configuration")).to_contain_text(f"connected account {account_id}")

    page.get_by_role("navigation").get_by_role("link", name="Accounts").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#accounts").get_by_role("button", name="Delete Console keys").click()
    expect(page.get_by_text("No accounts yet.")).to_be_visible()


def test_a_source_shows_its_configuration_with_the_secret_masked_and_is_edited_and_redeployed(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    source = deploy(client, component_code=SECRETS, name="console-secrets",
                    configured_props={"token": SECRET, "pageSize": 10})
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    config = page.locator("#configuration")
    expect(config.get_by_role("row", name="API token")).to_contain_text("(hidden)")
    expect(config.get_by_role("row", name="Page size")).to_contain_text("10")
    expect(config.get_by_role("row", name="HTTP endpoint")).to_contain_text("/http/")
    page.get_by_role("button", name="Edit").click()
    expect(page.get_by_label("API token")).to_have_attribute("placeholder", "unchanged (hidden)")
    expect(page.locator("#edit-form p.hint", has_text="Items per request")).to_be_visible()  # its description
    page.get_by_label("Page size").fill("25")
    code = page.get_by_label("Code")
    code.fill(code.input_value().replace('version: "0.0.1"', 'version: "0.0.2"'))
    shot(page, "10-source-edit")
    dom = page.content() + page.evaluate("[...document.querySelectorAll('input, textarea')].map((i) => i.value).join()")
    assert SECRET not in dom
    page.get_by_role("button", name="Save and re-deploy").click()
    expect(config.get_by_role("row", name="Page size")).to_contain_text("25")
    expect(page.locator(".meta")).to_contain_text("v0.0.2")  # the new code is deployed
    page.get_by_role("button", name="Run", exact=True).click()
    # the secret kept its value through the edit (sent back masked), the new page size applied
    events = page.get_by_role("list", name="Events")
    expect(events.locator("li").first).to_contain_text("token kept: true, page size 25")
    assert SECRET not in page.content()
    shot(page, "11-source-configuration")


def test_the_edit_form_shows_a_new_versions_trial_on_recorded_runs_before_deploy(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    from tests.e2e.test_source_trials import LIVE, SECRET, TRIED

    source = deploy(client, component_code=LIVE, name="console-trial", configured_props={"token": SECRET})
    url = source["configured_props"]["http"]["endpoint_url"]
    for n, order in enumerate(({"id": 1, "total": 5}, {"id": 2, "total": 7}), 1):
        assert httpx.post(url, json=order, timeout=60).status_code == 200
        wait_runs(client, f"/sources/{source['id']}", lambda runs, want=n: len(runs) == want, "the runs")
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Code").fill(TRIED)
    page.get_by_role("button", name="Save and re-deploy").click()
    diff = page.get_by_role("region", name="Trial on recorded runs")
    expect(diff.locator("#trial-head")).to_contain_text("1 changed, 1 added, 1 removed")
    runs = diff.get_by_role("list", name="Trial runs").locator("li")
    expect(runs).to_have_count(2)
    expect(runs.nth(0).locator(".diff.changed")).to_have_text(
        '~ o-1: {"order":1,"total":5,"n":1} → {"order":1,"total":500,"n":1}')
    expect(runs.nth(0).locator(".diff.added")).to_have_text('+ a-1 [audit]: {"audit":1,"token":"[secret]"}')
    expect(runs.nth(1).locator(".diff.removed")).to_contain_text("− o-2:")
    assert SECRET not in page.content()
    page.locator("#edit-form").screenshot(path=str(ARTIFACTS / "24-source-trial-diff.png"))
    expect(diff).not_to_contain_text("null")
    expect(page.locator(".meta")).to_contain_text("v1.0.0")  # not deployed yet
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.locator(".meta")).to_contain_text("v2.0.0")
    assert client.get(f"/sources/{source['id']}/event_summaries").json()["page_info"]["total_count"] == 2


def test_the_deploy_form_reads_in_words_and_a_timer_shows_its_schedule_and_pauses(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/deploy/headwater-schedule")
    form = page.locator("#props-form")
    expect(form.locator("#component-description")).to_contain_text("Emit an event on a schedule")
    expect(form.get_by_text("Schedule (Timer)")).to_be_visible()
    expect(form).not_to_contain_text("$.interface")
    expect(form.get_by_role("spinbutton")).to_have_value("1")  # its default, 60 s, as 1 minute
    expect(form.get_by_label("Unit")).to_have_value("60")
    form.get_by_role("spinbutton").fill("15")
    form.get_by_label("Source name").fill("console-timer")
    shot(page, "12-deploy-timer")
    form.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.locator("#schedule")).to_contain_text("runs every 15 minutes. Next run")
    expect(page.locator("#configuration")).to_contain_text("every 15 minutes")
    source_id = page.url.rsplit("/", 1)[1]
    assert client.get(f"/sources/{source_id}").json()["data"]["configured_props"]["timer"]["interval_seconds"] == 900
    shot(page, "13-timer-source")

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#source-state")).to_have_text("paused")
    expect(page.locator("#schedule")).to_contain_text("Paused: no run is scheduled.")
    assert client.get(f"/sources/{source_id}").json()["data"]["active"] is False
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#source-state")).to_have_text("active")
    expect(page.locator("#schedule")).to_contain_text("Next run")
    assert client.get(f"/sources/{source_id}").json()["data"]["active"] is True
    expect(page.locator("#health-facts")).to_contain_text("run once (catch-up skip); 0 skipped so far")
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Missed ticks").select_option("all")
    page.get_by_role("button", name="Save and re-deploy").click()
    expect(page.locator("#health-facts")).to_contain_text("each run (catch-up all)")
    assert client.get(f"/sources/{source_id}").json()["data"]["catch_up"] == "all"
    words = page.evaluate("""import("/console/props.js").then((p) => [
        p.intervalInWords(45), p.intervalInWords(3600), p.intervalInWords(5400),
        p.cronInWords("0 9 * * 1-5", "Europe/Paris"), p.cronInWords("*/5 * * * *"), p.cronInWords("0 0 1 * *"),
        p.typeName("$.interface.timer"), p.typeName("$.slack.channel")])""")
    assert words == ["every 45 seconds", "every hour", "every 90 minutes", "on weekdays at 09:00 (Europe/Paris)",
                     "every 5 minutes", "on the cron schedule 0 0 1 * *", "Timer", "slack channel"]


def test_a_source_gets_and_loses_listeners(page: Page, server: Server, person: User, client: httpx.Client,
                                           receiver: str, tmp_path: Path) -> None:
    source = deploy(client, component_key="headwater-http", name="console-emitter")
    other = deploy(client, component_key="headwater-http", name="console-listener")
    hook = client.post("/webhooks", params={"url": receiver + "/ok", "name": "console-listening-hook"}).json()["data"]
    (tmp_path / "noop.mjs").write_text(NOOP)
    step = {"name": "noop", "component": str(tmp_path / "noop.mjs")}
    (tmp_path / "flow.yaml").write_text(json.dumps({"name": "console-flow", "trigger": other["id"], "steps": [step]}))
    flow = server.cli("workflows", "deploy", str(tmp_path / "flow.yaml"), "--user", person.id)
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    expect(page.locator("#no-listeners")).to_be_visible()
    page.get_by_label("Add a listener").select_option(hook["id"])
    page.get_by_role("button", name="Subscribe").click()
    listeners = page.get_by_role("table", name="Listeners")
    expect(listeners).to_contain_text("Webhook console-listening-hook")
    page.get_by_label("Add a listener").select_option(other["id"])
    page.get_by_label("of", exact=True).select_option("$errors")
    page.get_by_role("button", name="Subscribe").click()
    expect(listeners.get_by_role("row", name="Source console-listener")).to_contain_text("Errors ($errors)")
    page.get_by_label("Add a listener").select_option(flow["id"])
    page.get_by_label("of", exact=True).select_option("")
    page.get_by_role("button", name="Subscribe").click()
    expect(listeners.get_by_role("row", name="Workflow console-flow")).to_contain_text("Events")
    shot(page, "14-subscriptions")
    mine = {(s["listener_id"], s["event_name"]) for s in client.get("/users/me/subscriptions").json()["data"]
            if s["emitter_id"] == source["id"]}
    assert mine == {(hook["id"], ""), (other["id"], "$errors"), (flow["id"], "")}

    listeners.get_by_role("button", name="Remove Webhook console-listening-hook").click()
    expect(listeners).not_to_contain_text("console-listening-hook")
    remaining = [s for s in client.get("/users/me/subscriptions").json()["data"] if s["emitter_id"] == source["id"]]
    assert {s["listener_id"] for s in remaining} == {other["id"], flow["id"]}
    assert httpx.post(other["configured_props"]["http"]["endpoint_url"], json={"to": "flow"}).status_code == 200
    wait_runs(client, f"/workflows/{flow['id']}", lambda runs: len(runs) == 1, "the workflow's run")
    page.goto(f"{server.base_url}/console/#/workflows/{flow['id']}")  # a workflow's page has its runs panel
    page.get_by_role("table", name="Runs", exact=True).locator("tbody tr").click()
    expect(page.locator("#run-trigger")).to_contain_text("to: \"flow\"")


def _delivered_once(client: httpx.Client, hook_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        data = client.get(f"/webhooks/{hook_id}/deliveries").json()["data"]
        if data and data[0]["attempts"]:
            return data[0]
        time.sleep(0.2)
    raise AssertionError(f"webhook {hook_id} got no attempt")


def test_webhook_pages_label_each_delivery_by_what_will_happen_to_it(
        page: Page, server: Server, person: User, client: httpx.Client, receiver: str) -> None:
    source = deploy(client, component_key="headwater-http", name="console-hooked")
    hooks = {}
    for path in ("ok", "flaky", "gone"):
        made = client.post("/webhooks", params={"url": f"{receiver}/{path}", "name": f"hook-{path}"})
        hooks[path] = made.json()["data"]
        client.post("/subscriptions", params={"emitter_id": source["id"], "listener_id": hooks[path]["id"]})
    endpoint = source["configured_props"]["http"]["endpoint_url"]
    assert httpx.post(endpoint, json={"n": 1}).status_code == 200
    for hook in hooks.values():
        _delivered_once(client, hook["id"])

    sign_in(page, server, person)
    page.get_by_role("navigation").get_by_role("link", name="Webhooks").click()
    page.get_by_role("link", name="hook-flaky").click()
    deliveries = page.locator("#deliveries")
    expect(deliveries.locator(".badge")).to_have_text(["retrying"])  # a 500 is tried again: not failed
    expect(deliveries).to_contain_text("next attempt")
    expect(deliveries.locator("ol.attempts li").first).to_contain_text("500")
    shot(page, "15-webhook-retrying")
    for path, label, note in (("ok", "delivered", "200"), ("gone", "failed", "no more attempts")):
        page.goto(f"{server.base_url}/console/#/webhooks/{hooks[path]['id']}")
        expect(page.locator("#deliveries .badge")).to_have_text([label])
        expect(page.locator("#deliveries")).to_contain_text(note)
    expect(page.locator("h2 .badge")).to_have_text("disabled")  # 410 Gone turned the webhook off
    shot(page, "16-webhook-failed")
    # a delivery not yet attempted, and one whose retries ran out, labelled from the API's record
    labels = page.evaluate("""import("/console/webhooks.js").then(({ deliveryLabel }) => [
        { status: "pending", next_attempt_at: null }, { status: "failed", next_attempt_at: 2000000000 },
        { status: "dead", next_attempt_at: null }, { status: "succeeded", next_attempt_at: null },
      ].map((d) => deliveryLabel(d).label))""")
    assert labels == ["pending", "retrying", "failed", "delivered"]


def test_the_registry_browser_searches_everything_published(page: Page, server: Server, person: User) -> None:
    sign_in(page, server, person)
    page.get_by_role("navigation").get_by_role("link", name="Registry").click()
    found = page.get_by_role("list", name="Published components").locator("li")
    expect(found.first).to_be_visible()
    total = found.count()
    assert total >= 6
    # the listing is read page after page: two at a time, it finds them all, each once
    keys = page.evaluate("""import("/console/lib.js").then((lib) => lib.all("/components/registry", {}, 2))
        .then((items) => items.map((c) => c.key))""")
    assert len(keys) == len(set(keys)) == total
    page.get_by_label("Search published components").fill("schedule")
    expect(found).to_have_count(1)
    expect(page.locator("#registry-count")).to_have_text(f"1 of {total} published components")
    shot(page, "17-registry")
    page.get_by_label("Search published components").fill("http request")  # words in any order and field
    expect(found.filter(has_text="http-request")).to_have_count(1)
    page.get_by_label("Search published components").fill("schedule")
    found.get_by_role("link", name="Schedule").click()
    expect(page.get_by_role("row", name="Schedule")).to_contain_text("Timer")
    shot(page, "18-registry-component")
    page.get_by_role("link", name="Deploy it").click()
    expect(page.get_by_role("heading", name="Configure Schedule")).to_be_visible()


def test_every_page_reads_well_on_a_phone(browser: Browser, server: Server, person: User, client: httpx.Client,
                                          receiver: str) -> None:
    source = deploy(client, component_code=SECRETS, name="console-phone-source-with-a-long-name",
                    configured_props={"token": SECRET, "pageSize": 5})
    long_url = f"{receiver}/ok/" + "long-path-" * 8
    hook = client.post("/webhooks", params={"url": long_url, "name": "phone"}).json()["data"]
    client.post("/subscriptions", params={"emitter_id": source["id"], "listener_id": hook["id"]})
    client.post(f"/sources/{source['id']}/run", json={})
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    try:
        sign_in(page, server, person)
        pages = {"sources": "#/sources", "source": f"#/sources/{source['id']}", "deploy": "#/deploy/headwater-schedule",
                 "webhooks": "#/webhooks", "webhook": f"#/webhooks/{hook['id']}", "registry": "#/registry",
                 "registry-component": "#/registry/headwater-http", "usage": "#/usage",
                 "accounts": "#/accounts"}
        for name, hash_ in pages.items():
            page.goto(f"{server.base_url}/console/{hash_}")
            expect(page.get_by_role("heading", level=2).first).to_be_visible()
            expect(page.get_by_text("Loading…")).to_have_count(0)
            # a page wider than the phone would also widen innerWidth (the mobile viewport zooms out)
            width, inner = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            assert width <= inner == 390, f"the {name} page scrolls sideways on a phone ({width}px, {inner}px)"
            shot(page, f"phone-{name}")
    finally:
        context.close()


def test_api_docs_page_loads_without_a_cdn(page: Page, server: Server) -> None:
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(server.base_url) else outside.append(r.url))
    page.goto(server.base_url + "/docs")
    expect(page.get_by_text("Headwater", exact=False).first).to_be_visible()
    expect(page.locator(".opblock").first).to_be_visible()  # Swagger UI rendered the operations
    shot(page, "9-api-docs")
    assert outside == []


def test_the_state_view_shows_keys_as_text_sets_one_and_restores_a_snapshot(
        page: Page, server: Server, person: User, client: httpx.Client) -> None:
    source = deploy(client, component_code=STATEFUL, name="console-state")
    path = f"/sources/{source['id']}/state"
    for n in (1, 2):
        assert client.post(f"/sources/{source['id']}/run", json={}).status_code == 202
        wait_runs(client, f"/sources/{source['id']}", lambda runs, n=n: sum(r["kind"] == "manual" for r in runs) == n,
                  f"run {n}")
    assert client.put(f"/sources/{source['id']}", json={"name": "console-state"}).status_code == 200  # a snapshot
    assert client.patch(path, json={"count": 100}).status_code == 200  # the state gone bad
    sign_in(page, server, person)
    page.goto(f"{server.base_url}/console/#/sources/{source['id']}")
    state = page.locator("#state")
    expect(state.locator('tr[data-key="count"] pre')).to_have_text("100")
    expect(state.locator('tr[data-key="html"] pre')).to_have_text('"<img src=x onerror=\\"window.pwned=1\\">"')
    assert state.locator("img").count() == 0 and not page.evaluate("window.pwned")  # values are text
    page.get_by_label("Key", exact=True).fill("note")
    page.get_by_label("Value").fill("hello <b>there</b>")
    page.get_by_role("button", name="Set key").click()
    expect(state.locator('tr[data-key="note"] pre')).to_have_text('"hello <b>there</b>"')
    assert state.locator("b").count() == 0
    snapshots = page.get_by_role("table", name="Snapshots").locator("tbody tr")
    expect(snapshots).to_have_count(2)
    expect(snapshots.nth(0)).to_contain_text("update")
    expect(snapshots.nth(1)).to_contain_text("deploy")
    shot(page, "24-source-state")
    page.once("dialog", lambda dialog: dialog.accept())
    snapshots.nth(0).get_by_role("button", name="Restore").click()
    expect(state.locator('tr[data-key="count"] pre')).to_have_text("2")
    expect(state.locator('tr[data-key="note"]')).to_have_count(0)  # the whole db as it was, not a merge
    expect(snapshots).to_have_count(3)
    expect(snapshots.nth(0)).to_contain_text("restore")
    expect(page.locator("#status")).to_contain_text("To undo it, restore the newest snapshot")
    shot(page, "25-source-state-restored")
    assert client.get(path).json()["data"]["db"]["count"] == 2
