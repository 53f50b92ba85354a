"""A secret is never returned or quoted, whatever a later PUT declares (DECISIONS, Accounts: "Secret
values are never returned or quoted in plaintext, in any answer, error or log line";
docs/security.md, "Secret props").

Two ways an ordinary account got its stored secret back: a PUT whose new code declares the prop
with `options` got a 422 quoting the stored value; a PUT whose new code drops `secret: true`
stored it in plaintext and answered it. Service tests on the fakes (tests/services/test_secret_props.py),
then (here) black-box on both backends.
"""

from __future__ import annotations

import hashlib
import uuid

import httpx
import pytest

from tests.conftest import Server
from tests.e2e.test_runs import post, wait_events

pytestmark = pytest.mark.both_modes

SECRET = "hunter2-" + uuid.uuid4().hex
MASK = "********"
# end to end, both backends


def code(token: str) -> str:
    key = f"secrets-{uuid.uuid4().hex[:10]}"
    return f"""import crypto from "crypto";
export default {{
  name: "Secrets {key}", key: "{key}", version: "0.0.1", type: "source",
  props: {{ http: "$.interface.http", token: {token} }},
  async run() {{ this.$emit({{ sha256: crypto.createHash("sha256").update(this.token).digest("hex") }}); }},
}};
"""


SECRET_CODE = code('{ type: "string", secret: true }')
OPTIONS_CODE = code('{ type: "string", options: ["a", "b"] }')
PLAIN_CODE = code('{ type: "string" }')


def deployed(api: httpx.Client) -> tuple[str, str]:
    r = api.post("/sources", json={"component_code": SECRET_CODE, "configured_props": {"token": SECRET}})
    assert r.status_code == 200, r.text
    return r.json()["data"]["id"], r.json()["data"]["configured_props"]["http"]["endpoint_url"]


def test_a_put_with_options_answers_422_without_the_secret(paid_api: httpx.Client) -> None:
    source_id, _ = deployed(paid_api)
    r = paid_api.put(f"/sources/{source_id}", json={"component_code": OPTIONS_CODE})
    assert r.status_code == 422, r.text
    assert SECRET not in r.text
    assert "the stored value is not one of the options" in r.json()["details"]["token"][0]


def test_a_put_dropping_secret_true_neither_stores_nor_answers_it(server: Server, paid_api: httpx.Client) -> None:
    source_id, url = deployed(paid_api)
    r = paid_api.put(f"/sources/{source_id}", json={"component_code": PLAIN_CODE})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["configured_props"]["token"] == MASK
    for answer in (paid_api.get(f"/sources/{source_id}"), paid_api.get("/users/me/sources", params={"limit": 100})):
        assert answer.status_code == 200 and SECRET not in answer.text
    assert post(url, {}).status_code == 200  # the component still gets the value itself
    assert wait_events(paid_api, source_id, 1)[0]["event"] == {"sha256": hashlib.sha256(SECRET.encode()).hexdigest()}
    if server.env.get("HEADWATER_BACKEND") != "aws-emulated":  # moto keeps its tables in memory
        for path in server.data_dir.rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in (server.data_dir / "server.log").read_text(errors="replace")
