"""A secret is never returned or quoted, whatever a later PUT declares (DECISIONS, Accounts: "Secret
values are never returned or quoted in plaintext, in any answer, error or log line";
docs/security.md, "Secret props").

Two ways an ordinary account got its stored secret back: a PUT whose new code declares the prop
with `options` got a 422 quoting the stored value; a PUT whose new code drops `secret: true`
stored it in plaintext and answered it. Service tests on the fakes, then black-box on both backends.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import httpx
import pytest

from headwater.domain.errors import Invalid
from headwater.domain.pagination import PageRequest
from headwater.domain.runs import RunResult
from headwater.services.sources import SourceRequest
from tests.conftest import Server
from tests.e2e.test_runs import post, wait_events
from tests.fakes import World, world
from tests.services.test_services import component_code, deploy, principal, run_task

pytestmark = pytest.mark.both_modes

SECRET = "hunter2-" + uuid.uuid4().hex
MASK = "********"
TOKEN = {"name": "token", "type": "string", "secret": True}
PLAIN_TOKEN = {"name": "token", "type": "string"}
OPTIONS_TOKEN = {"name": "token", "type": "string", "options": ["a", "b"]}
HTTP = {"name": "http", "type": "$.interface.http"}


def stored(w: World, source_id: str) -> dict[str, Any]:
    return w.store.data.sources[source_id].configured_props


def encrypted(value: Any) -> bool:
    """The stored form of a secret (the fakes' Secrets "encrypt" readably, so look at the form)."""
    return isinstance(value, dict) and ("$secret" in value or "$secret" in value.get("$auth", {}))


def update(w: World, who: Any, source_id: str, props: list[dict[str, Any]], configured: dict | None = None) -> Any:
    req = SourceRequest(component_code=component_code(configurable_props=[HTTP, *props]), configured_props=configured)
    return w.services.sources.update(who, source_id, req)


def secret_source(w: World) -> tuple[Any, Any]:
    ada = principal(w)
    source = deploy(w, ada, configurable_props=[HTTP, TOKEN], props={"token": SECRET})
    assert encrypted(stored(w, source.id)["token"])
    return ada, source


# the rules, on the fakes


def test_new_code_with_options_does_not_quote_the_stored_secret() -> None:
    w = world()
    ada, source = secret_source(w)
    for props in ([{**OPTIONS_TOKEN, "secret": True}], [OPTIONS_TOKEN]):
        with pytest.raises(Invalid) as refused:
            update(w, ada, source.id, props)
        said = json.dumps([refused.value.message, refused.value.details])
        assert SECRET not in said, said
        assert refused.value.details == {"token": ['the stored value is not one of the options ["a", "b"]']}
    with pytest.raises(Invalid) as masked:  # the mask sent back means the stored value too
        update(w, ada, source.id, [OPTIONS_TOKEN], {"token": MASK})
    assert SECRET not in json.dumps([masked.value.message, masked.value.details])


def test_a_new_secret_value_outside_the_options_is_not_quoted_either() -> None:
    w = world()
    ada = principal(w)
    with pytest.raises(Invalid) as refused:
        deploy(w, ada, configurable_props=[HTTP, {**OPTIONS_TOKEN, "secret": True}], props={"token": SECRET})
    assert SECRET not in json.dumps([refused.value.message, refused.value.details])


def test_new_code_without_secret_true_keeps_the_stored_value_encrypted_and_masked() -> None:
    w = world()
    ada, source = secret_source(w)
    for configured in (None, {"token": MASK}):
        updated = update(w, ada, source.id, [PLAIN_TOKEN], configured)
        assert encrypted(stored(w, source.id)["token"])
        assert w.services.sources.to_api(updated)["configured_props"]["token"] == MASK
        listed = w.services.sources.list(ada, None, PageRequest()).items
        assert SECRET not in json.dumps([w.services.sources.to_api(s) for s in listed])
    seen: list[Any] = []

    def run(instance: Any, event: Any) -> RunResult:
        seen.append(instance.props["token"])
        return RunResult()

    w.runner.script = run
    w.services.runs.run_batch([run_task(source.id, {})], lambda t, r: None)
    assert seen == [SECRET]  # the component still gets the value itself


def test_a_new_value_for_a_prop_no_longer_secret_is_stored_as_the_code_says() -> None:
    w = world()
    ada, source = secret_source(w)
    updated = update(w, ada, source.id, [PLAIN_TOKEN], {"token": "public-value"})
    assert stored(w, source.id)["token"] == "public-value"
    assert w.services.sources.to_api(updated)["configured_props"]["token"] == "public-value"


def test_app_credentials_stay_encrypted_when_the_prop_becomes_a_plain_object() -> None:
    w = world()
    ada = principal(w)
    source = deploy(w, ada, configurable_props=[HTTP, {"name": "github", "type": "app", "app": "github"}],
                    props={"github": {"$auth": {"oauth_access_token": SECRET}}})
    updated = update(w, ada, source.id, [{"name": "github", "type": "object"}])
    assert encrypted(stored(w, source.id)["github"])
    assert SECRET not in json.dumps(w.services.sources.to_api(updated))


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
