"""A secret is never returned or quoted, whatever a later PUT declares (DECISIONS, Accounts: "Secret
values are never returned or quoted in plaintext, in any answer, error or log line";
docs/security.md, "Secret props").

Two ways an ordinary account got its stored secret back: a PUT whose new code declares the prop
with `options` got a 422 quoting the stored value; a PUT whose new code drops `secret: true`
stored it in plaintext and answered it. Here, the service tests on the fakes;
tests/e2e/security/test_secrets.py has the black-box ones on both backends.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from headwater.domain.errors import Invalid
from headwater.domain.pagination import PageRequest
from headwater.domain.runs import RunResult
from headwater.services.sources import SourceRequest
from tests.fakes import World, to_end, world
from tests.services.test_services import component_code, deploy, principal, run_task

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
    return to_end(w.services.sources.update(who, source_id, req))


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
    to_end(w.services.runs.run_batch([run_task(source.id, {})]))
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
