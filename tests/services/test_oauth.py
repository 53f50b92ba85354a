"""OAuth that keeps working, on the fakes (issue 22, part B): apps' OAuth clients, the connect
flow (state single use, expiring, PKCE verifier kept sealed), refresh before use once per
account however many callers need it, and what a permanent or a transient failure does."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any

import pytest

from headwater.adapters.in_process_lease import InProcessLease
from headwater.domain.connected_accounts import ACTIVE, NEEDS_RECONNECT, AccountUse
from headwater.domain.errors import BadRequest, Invalid
from headwater.domain.models import Principal
from headwater.domain.oauth import OPERATOR, REFRESH_WAIT_S
from headwater.domain.runs import RunResult
from headwater.ports import OAuthGrantError, OAuthUnavailable, TryLater
from headwater.services.clock import utc_day
from headwater.services.connected_accounts import AccountUnusable
from headwater.services.sources import SourceRequest
from tests.fakes import FakeOAuthClient, LeaseHeldElsewhere, World, to_end, world
from tests.services.test_connected_accounts import errors, runs_seeing
from tests.services.test_services import HTTP, component_code, deploy, principal, run_task

SECRET = "client-secret-value"
CLIENT = {"client_id": "hw", "client_secret": SECRET, "authorize_url": "https://id.example.com/authorize",
          "token_url": "https://id.example.com/token", "scopes": ["read"], "extra_params": {"prompt": "consent"}}
GITHUB = {"name": "github", "type": "app", "app": "github"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def oauth_world() -> tuple[World, FakeOAuthClient, Clock]:
    w, clock = world(), Clock()
    provider = FakeOAuthClient(clock, lifetime_s=3600)
    w.services.oauth.client = provider
    w.services.oauth.clock = clock
    w.services.oauth.lease = InProcessLease()
    w.services.oauth.set_client(OPERATOR, "github", CLIENT)
    return w, provider, clock


def connect(w: World, provider: FakeOAuthClient, who: Principal, account: Any = None) -> Any:
    started = w.services.oauth.start(who, who.user.id, "github", "my github", account)
    assert f"state={started.state}" in started.authorize_url
    pending = w.store.data.pending_connects[started.state]
    verifier = w.services.adapters.secrets.decrypt(pending.verifier["$secret"])
    return asyncio.run(w.services.oauth.complete(started.state, provider.authorize(verifier), None))


def test_clients_are_checked_sealed_answered_without_the_secret_and_a_users_own_wins() -> None:
    w, _, _ = oauth_world()
    with pytest.raises(Invalid) as bad:
        w.services.oauth.set_client("user_a", "github", {**CLIENT, "token_url": "ftp://x", "extra_params": {
            "state": "mine"}, "scopes": ["a b"]})
    assert set(bad.value.details or {}) == {"token_url", "extra_params", "scopes"}
    assert SECRET not in json.dumps(bad.value.details)
    stored = w.store.data.oauth_clients[(OPERATOR, "github")]
    assert set(stored.client_secret) == {"$secret"} and SECRET not in json.dumps(stored.to_api())
    assert stored.to_api()["has_client_secret"] is True
    own = w.services.oauth.set_client("user_a", "github", {**CLIENT, "client_id": "own", "client_secret": None})
    assert w.services.oauth.client_for("user_a", "github") == own and own.client_secret == {}
    assert w.services.oauth.client_for("user_b", "github") == stored
    assert [c.client_id for c in w.services.oauth.clients("user_a")] == ["own"]


def test_connect_creates_an_oauth_account_and_its_state_is_single_use() -> None:
    w, provider, _ = oauth_world()
    ada = principal(w)
    with pytest.raises(Invalid, match="no OAuth client"):
        w.services.oauth.start(ada, ada.user.id, "gitlab")
    account = connect(w, provider, ada)
    assert (account.kind, account.status, account.owner, account.name) == ("oauth", ACTIVE, ada.user.id, "my github")
    assert account.fields == ("oauth_access_token", "oauth_refresh_token", "oauth_uid")
    assert w.services.connected_accounts.credentials_for(account.id, own(account)) == {
        "oauth_access_token": "access-1", "oauth_refresh_token": "refresh-1", "oauth_uid": "uid-1"}
    assert set(w.store.data.connected_accounts[account.id][1].credentials) == {"$secret"}
    assert "access-1" not in json.dumps(account.to_api())

    started = w.services.oauth.start(ada, ada.user.id, "github")
    verifier = w.services.adapters.secrets.decrypt(w.store.data.pending_connects[started.state].verifier["$secret"])
    code = provider.authorize(verifier)
    asyncio.run(w.services.oauth.complete(started.state, code, None))
    with pytest.raises(BadRequest, match="completed already or expired"):
        asyncio.run(w.services.oauth.complete(started.state, code, None))
    with pytest.raises(BadRequest):
        asyncio.run(w.services.oauth.complete("made-up", code, None))
    denied = w.services.oauth.start(ada, ada.user.id, "github")
    with pytest.raises(BadRequest, match="access_denied"):
        asyncio.run(w.services.oauth.complete(denied.state, None, "access_denied"))


def test_tokens_are_refreshed_before_a_run_when_they_expire_within_the_margin() -> None:
    w, provider, clock = oauth_world()
    seen = runs_seeing(w)
    ada = principal(w)
    account = connect(w, provider, ada)
    source = deploy(w, ada, configurable_props=[*HTTP, GITHUB], props={"github": {"authProvisionId": account.id}})
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t1")]))
    clock.now += 3600 - 30  # within the 60 s margin
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t2")]))
    to_end(w.services.runs.run_batch([run_task(source.id, {}, "t3")]))
    assert [p["github"]["$auth"]["oauth_access_token"] for p in seen] == ["access-1", "access-2", "access-2"]
    assert provider.refreshes == 1
    renewed = w.store.data.connected_accounts[account.id][1]
    assert renewed.expires_at == int(clock.now) + 3600 and renewed.version == 2


def test_many_callers_at_once_cause_one_refresh() -> None:
    w, provider, clock = oauth_world()
    account = connect(w, provider, principal(w))
    clock.now += 3600
    start, got = threading.Barrier(20), []

    def use() -> None:
        start.wait()
        got.append(w.services.connected_accounts.credentials_for(account.id, own(account))["oauth_access_token"])
    threads = [threading.Thread(target=use) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["access-2"] * 20 and provider.refreshes == 1


def test_a_refused_refresh_marks_the_account_errors_every_source_and_a_reconnect_heals_it() -> None:
    w, provider, clock = oauth_world()
    seen = runs_seeing(w)
    ada = principal(w)
    account = connect(w, provider, ada)
    props = {"github": {"authProvisionId": account.id}}
    first = deploy(w, ada, name="first", configurable_props=[*HTTP, GITHUB], props=props)
    second = deploy(w, ada, name="second", configurable_props=[*HTTP, GITHUB], props=props)
    org = w.services.accounts.create_org("acme", ada.user.id)
    ada = Principal(ada.user, frozenset({org.id}))
    in_org = to_end(w.services.sources.create(ada, SourceRequest(component_code=component_code(
        configurable_props=[*HTTP, GITHUB]), name="in-org", configured_props=props), org.id))
    clock.now += 3600
    provider.fail_next = [OAuthGrantError("the provider refused: invalid_grant: grant request is invalid")]
    [result] = to_end(w.services.runs.run_batch([run_task(first.id, {}, "t1")]))
    assert result is not None and result.error_code == "ACCOUNT_NEEDS_RECONNECT" and seen == []
    assert w.store.data.connected_accounts[account.id][1].status == NEEDS_RECONNECT
    assert w.services.connected_accounts.get(ada, account.id).to_api()["status"] == NEEDS_RECONNECT
    for source in (first, second, in_org):  # in_org: a member's own account; first: once, from its run
        [error] = errors(w, source.id)
        assert error["code"] == "ACCOUNT_NEEDS_RECONNECT" and "invalid_grant" in error["message"]
        assert "refresh-" not in error["message"] and "access-" not in error["message"]

    healed = connect(w, provider, ada, account=w.services.connected_accounts.get(ada, account.id))
    assert healed.id == account.id and healed.status == ACTIVE
    to_end(w.services.runs.run_batch([run_task(second.id, {}, "t2")]))
    assert seen[-1]["github"]["$auth"]["oauth_access_token"] == "access-2"


def test_a_transient_failure_keeps_a_valid_token_and_otherwise_fails_the_call_without_marking() -> None:
    w, provider, clock = oauth_world()
    account = connect(w, provider, principal(w))
    clock.now += 3600 - 30  # due, but still valid
    provider.fail_next = [OAuthUnavailable("the token endpoint answered 503")]
    assert w.services.connected_accounts.credentials_for(account.id, own(account))["oauth_access_token"] == "access-1"
    clock.now += 60  # expired
    provider.fail_next = [OAuthUnavailable("the token endpoint answered 503")]
    with pytest.raises(AccountUnusable) as failed:
        w.services.connected_accounts.credentials_for(account.id, own(account))
    assert failed.value.code == "ACCOUNT_REFRESH_FAILED"
    assert w.store.data.connected_accounts[account.id][1].status == ACTIVE
    assert w.services.connected_accounts.credentials_for(account.id, own(account))["oauth_access_token"] == "access-2"


def test_a_refresh_lease_held_elsewhere_keeps_a_valid_token_and_otherwise_fails_for_now() -> None:
    w, provider, clock = oauth_world()
    w.services.oauth.lease = LeaseHeldElsewhere()  # type: ignore[assignment]
    account = connect(w, provider, principal(w))
    clock.now += 3600 - 30
    with w.services.oauth.lease.hold(account.id, 90):
        credentials = w.services.connected_accounts.credentials_for(account.id, own(account))
        assert credentials["oauth_access_token"] == "access-1"
        clock.now += 60
        with pytest.raises(AccountUnusable) as failed:
            w.services.connected_accounts.credentials_for(account.id, own(account))
    assert failed.value.code == "ACCOUNT_REFRESH_FAILED" and provider.refreshes == 0
    assert w.services.connected_accounts.credentials_for(account.id, own(account))["oauth_access_token"] == "access-2"


def test_a_hook_gets_a_refreshed_token_too() -> None:
    w, provider, clock = oauth_world()
    hooked: list[dict[str, Any]] = []
    w.runner.hooks = lambda instance, hook: hooked.append(instance.props) or RunResult()
    ada = principal(w)
    account = connect(w, provider, ada)
    clock.now += 3600
    deploy(w, ada, configurable_props=[*HTTP, GITHUB], hooks=["activate"],
           props={"github": {"authProvisionId": account.id}})
    assert [p["github"]["$auth"]["oauth_access_token"] for p in hooked] == ["access-2"]
    assert provider.refreshes == 1


def own(account: Any) -> AccountUse:
    """The account used by what runs in its owner's namespace."""
    return AccountUse(account.owner, None)


def refreshing_elsewhere(w: World, account_id: str) -> tuple[threading.Event, threading.Thread]:
    """Another caller (a thread) holding the account's refresh lease until the event is set."""
    taken, finish = threading.Event(), threading.Event()

    def hold() -> None:
        with w.services.oauth.lease.hold(account_id, 90):
            taken.set()
            finish.wait(120)
    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert taken.wait(10)
    return finish, holder


def within_5_s(call: Callable[[], Any]) -> Any:
    """The call's value (or exception) if it comes within 5 s; a call still waiting fails the test."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(call)
        try:
            return future.result(timeout=5)
        except FuturesTimeout:
            raise AssertionError("the run is still waiting for another caller's refresh after 5 s") from None


def test_a_run_whose_account_is_being_refreshed_elsewhere_gives_its_batch_back_instead_of_waiting() -> None:
    """A refresh holds only the worker of the run that makes it: a run finding the refresh lease
    taken uses the token while it is valid; once expired, its batch goes back to the queue
    (TryLater, soon) having used no quota and left no error, and runs when the refresh is over."""
    w, provider, clock = oauth_world()
    seen = runs_seeing(w)
    ada = principal(w, "free")
    account = connect(w, provider, ada)
    source = deploy(w, ada, configurable_props=[*HTTP, GITHUB], props={"github": {"authProvisionId": account.id}})
    clock.now += 3600 - 30  # due for a refresh, still valid
    finish, holder = refreshing_elsewhere(w, account.id)
    try:
        within_5_s(lambda: to_end(w.services.runs.run_batch([run_task(source.id, {}, "t1", "manual")])))
        assert seen[-1]["github"]["$auth"]["oauth_access_token"] == "access-1"
        clock.now += 60  # expired
        admitted = w.usage.days[(ada.user.id, utc_day())]["admitted"]
        task = run_task(source.id, {}, "t2", "manual")
        with pytest.raises(TryLater) as later:
            within_5_s(lambda: to_end(w.services.runs.run_batch([task])))
        assert 0 < later.value.after_s <= 1 and "another refresh" in str(later.value)
        assert w.usage.days[(ada.user.id, utc_day())]["admitted"] == admitted and errors(w, source.id) == []
        assert len(seen) == 1 and provider.refreshes == 0
    finally:
        finish.set()
        holder.join()
    again = dataclasses.replace(task, deferred_since=time.time())
    [result] = to_end(w.services.runs.run_batch([again]))
    assert result is not None and result.error_code is None
    assert seen[-1]["github"]["$auth"]["oauth_access_token"] == "access-2" and provider.refreshes == 1


def test_a_run_given_back_for_a_refresh_looks_again_less_often_and_fails_after_the_bound() -> None:
    w, provider, clock = oauth_world()
    ada = principal(w)
    account = connect(w, provider, ada)
    source = deploy(w, ada, configurable_props=[*HTTP, GITHUB], props={"github": {"authProvisionId": account.id}})
    clock.now += 3600 + 1
    finish, holder = refreshing_elsewhere(w, account.id)
    try:
        def after_s(waited_s: float) -> float:
            task = dataclasses.replace(run_task(source.id, {}, "t1"), deferred_since=time.time() - waited_s)
            with pytest.raises(TryLater) as later:
                to_end(w.services.runs.run_batch([task]))
            return later.value.after_s
        assert after_s(1) < after_s(20) <= 5
        gave_up = dataclasses.replace(run_task(source.id, {}, "t2"), deferred_since=time.time() - REFRESH_WAIT_S)
        [result] = to_end(w.services.runs.run_batch([gave_up]))
    finally:
        finish.set()
        holder.join()
    assert result is not None and result.error_code == "ACCOUNT_REFRESH_FAILED"
    [error] = errors(w, source.id)
    assert error["code"] == "ACCOUNT_REFRESH_FAILED" and "another refresh" in error["message"]
    assert provider.refreshes == 0


def test_callers_other_than_runs_still_wait_for_the_refresh_under_way() -> None:
    """A hook, `options()` or a workflow step waits for the refresh's lease (bounded: LEASE_S), and
    uses the tokens it brought."""
    w, provider, clock = oauth_world()
    account = connect(w, provider, principal(w))
    clock.now += 3600 + 1
    finish, holder = refreshing_elsewhere(w, account.id)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(w.services.connected_accounts.credentials_for, account.id, own(account))
        with pytest.raises(FuturesTimeout):  # still waiting, where a run would have given up at once
            waiting.result(timeout=0.3)
        finish.set()
        assert waiting.result(timeout=10)["oauth_access_token"] == "access-2"
    holder.join()
