"""Shapes of registry components that Headwater answered wrongly (issue 36, item 4: what
bench/registry_try.py found), each on a small component of ours of the same shape."""

from __future__ import annotations

import httpx

SLOW = httpx.Timeout(120.0)

# An app whose propDefinition's options() asks its API (calendly's, databricks' shape): here a host
# that does not resolve, as any API does in a sandbox with no way out.
OPTIONS_ASK_THE_API = """
const app = {
  type: "app",
  app: "example_api",
  propDefinitions: {
    eventId: {
      type: "string",
      label: "Event",
      async options() {
        const r = await fetch(`https://api.${this.$auth.subdomain}.invalid/events`);
        return (await r.json()).map((e) => e.id);
      },
    },
  },
};
export default {
  key: "shape-options-ask-the-api",
  name: "Get Event",
  version: "0.0.1",
  type: "action",
  props: { app, eventId: { propDefinition: [app, "eventId"] } },
  async run() { return this.eventId; },
};
"""


def test_options_that_throw_are_the_components_failure_not_the_runners(api: httpx.Client) -> None:
    r = api.post("/components", json={"component_code": OPTIONS_ASK_THE_API}, timeout=SLOW)
    assert r.status_code == 200, r.text
    component_id = r.json()["data"]["id"]
    body = {"configured_props": {"app": {"$auth": {"subdomain": "nowhere"}}}}
    r = api.post(f"/components/{component_id}/props/eventId/options", json=body, timeout=SLOW)
    # was 503 "The runner failed: ..." (a form told to try again later, forever)
    assert r.status_code == 422, r.text
    assert "options() of eventId failed: fetch failed" in r.json()["error"]
