"""The console in a real browser (Playwright driving Debian's Chromium): sign in, deploy the HTTP
source from the registry with the generated form, send it a request, watch the event arrive
without reloading, open its JSON, see a thrown error on the errors pane. A screenshot of each
page is saved under tests/artifacts/console/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.conftest import Server, User, new_user

ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "console"
CHROMIUM = "/usr/bin/chromium"
THROWER = """export default {
  name: "Console thrower", version: "0.0.1",
  props: { http: "$.interface.http" },
  async run(event) { throw new Error("console saw this: " + event.body.why); },
};"""

KEYED_SOURCE = """export default {
  name: "console-keyed", version: "0.0.1",
  props: { keyed: { type: "app", app: "keyed_app" }, http: "$.interface.http" },
  async run() { this.$emit({ fields: Object.keys(this.keyed.$auth) }) },
};"""


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
    yield page
    context.close()


@pytest.fixture(scope="module")
def person(server: Server) -> User:
    return new_user(server, tier="paid")


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

    assert httpx.post(endpoint, json={"order": 42}).status_code == 200
    item = events.locator("li").first
    expect(item).to_contain_text("42")  # arrived over the live stream: the page was not reloaded
    item.click()
    shown = json.loads(page.locator("#event-json").inner_text())
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
    assert json.loads(page.locator("#event-json").inner_text())["event"]["error"]["code"] == "RUNTIME_ERROR"
    shot(page, "6-errors")
    page.get_by_label("Event (JSON)").fill('{"body": {"why": "by hand"}}')
    page.get_by_role("button", name="Run", exact=True).click()
    expect(errors.locator("li")).to_have_count(2)


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
    shot(page, "9-accounts")
    account_id = row.locator("code").inner_text()

    page.get_by_role("navigation").get_by_role("link", name="Deploy").click()  # the deploy form offers it
    page.get_by_label("…or paste component code").fill(KEYED_SOURCE)
    page.get_by_role("button", name="Load its props").click()
    page.get_by_label("keyed: connected account").select_option(account_id)
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.get_by_role("heading", name="console-keyed active")).to_be_visible()
    source_id = page.url.rsplit("/", 1)[1]
    deployed = httpx.get(f"{server.base_url}/v1/sources/{source_id}",
                         headers={"Authorization": f"Bearer {person.api_key}"}).json()["data"]
    assert deployed["configured_props"]["keyed"] == {"authProvisionId": account_id}

    page.get_by_role("navigation").get_by_role("link", name="Accounts").click()
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete Console keys").click()
    expect(page.get_by_text("No accounts yet.")).to_be_visible()


def test_the_console_reads_well_on_a_phone(browser: Browser, server: Server, person: User) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    try:
        sign_in(page, server, person)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the sources page scrolls sideways on a phone ({width}px)"
        shot(page, "8-phone")
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
