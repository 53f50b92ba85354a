"""A tenant's share of waits on the outside (services/tenant_slots.py), on the fakes: past its
share a tenant's further calls wait as coroutines, then are refused (503, Retry-After), while
another tenant's go ahead; an OAuth callback refused so keeps its connect, which can be completed
by sending the callback again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from headwater.domain.models import Principal
from headwater.domain.oauth import OPERATOR
from headwater.services.clock import utc_day
from headwater.services.oauth import EXCHANGES_PER_TENANT
from headwater.services.tenant_slots import TenantBusy, TenantLimits, TenantSlots
from tests.fakes import FakeAsyncRunner, FakeOAuthClient, FakeRunner, world
from tests.security.test_compute_rule import PICK
from tests.services.test_oauth import CLIENT
from tests.services.test_services import component_code


def test_past_its_share_a_tenant_waits_then_is_refused_while_another_goes_ahead() -> None:
    async def scenario() -> None:
        slots = TenantSlots(2, 0.3, "token requests")
        release = asyncio.Event()

        async def hold(tenant: str) -> None:
            async with slots.hold(tenant):
                await release.wait()
        holders = [asyncio.create_task(hold("a")) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(TenantBusy) as busy:
            async with slots.hold("a"):
                pass
        assert busy.value.status == 503 and busy.value.retry_after == 1 and "2 at once" in busy.value.message
        async with asyncio.timeout(1):
            async with slots.hold("b"):
                pass
        waiting = asyncio.create_task(hold("a"))  # gets a turn once one is given back
        release.set()
        await asyncio.gather(*holders, waiting)
        assert slots.in_use() == 0
    asyncio.run(scenario())


class SlowProvider(FakeOAuthClient):
    """Exchanges wait until `answer` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.in_flight = 0

    async def exchange(self, endpoints: Any, code: str, redirect_uri: str, verifier: str) -> Any:
        self.in_flight += 1
        await self.answer.wait()
        self.in_flight -= 1
        return await super().exchange(endpoints, code, redirect_uri, verifier)


def test_a_callback_past_the_tenants_share_is_refused_and_keeps_its_connect() -> None:
    w = world()
    provider = SlowProvider()
    w.services.oauth.client = provider
    w.services.oauth.exchanges.wait_s = 0.3
    w.services.oauth.set_client(OPERATOR, "github", CLIENT)
    ada, bob = (Principal(w.services.accounts.create_user(name, f"{name}@example.com", "paid")[0])
                for name in ("ada", "bob"))

    def started(who: Any) -> tuple[str, str]:
        state = w.services.oauth.start(who, who.user.id, "github").state
        verifier = w.services.adapters.secrets.decrypt(w.store.data.pending_connects[state].verifier["$secret"])
        return state, provider.authorize(verifier)
    adas = [started(ada) for _ in range(EXCHANGES_PER_TENANT + 1)]
    bobs = started(bob)

    async def scenario() -> None:
        complete = w.services.oauth.complete
        in_flight = [asyncio.create_task(complete(state, code, None)) for state, code in adas[:-1]]
        while provider.in_flight < EXCHANGES_PER_TENANT:
            await asyncio.sleep(0.01)
        with pytest.raises(TenantBusy):
            await complete(*adas[-1], None)
        assert adas[-1][0] in w.store.data.pending_connects  # not spent: the callback can be sent again
        bob_done = asyncio.create_task(complete(*bobs, None))
        while provider.in_flight < EXCHANGES_PER_TENANT + 1:  # bob's exchange started beside ada's
            await asyncio.sleep(0.01)
        provider.answer.set()
        accounts = await asyncio.gather(*in_flight, bob_done, complete(*adas[-1], None))
        assert [a.owner for a in accounts] == [ada.user.id] * EXCHANGES_PER_TENANT + [bob.user.id, ada.user.id]
    asyncio.run(scenario())


def test_each_kind_of_call_has_its_own_share_and_no_share_means_no_limit() -> None:
    async def scenario() -> None:
        limits = TenantLimits(1, 0.2)
        async with limits.runner_calls.hold("a"):
            with pytest.raises(TenantBusy) as busy:
                async with limits.runner_calls.hold("a"):
                    pass
            assert "describes, options(), additionalProps calls and trials" in busy.value.message
            async with asyncio.timeout(1):
                async with limits.hooks.hold("a"), limits.url_fetches.hold("a"), limits.runner_calls.hold("b"):
                    pass
        unlimited = TenantSlots(0, 0.2, "calls")
        async with asyncio.timeout(1):
            async with unlimited.hold("a"), unlimited.hold("a"), unlimited.hold("a"):
                assert unlimited.in_use() == 0
    asyncio.run(scenario())


class HeldOptions(FakeAsyncRunner):
    """options() of the namespaces in `held` wait until `release` is set."""

    def __init__(self, fake: FakeRunner, held: set[str]) -> None:
        super().__init__(fake)
        self.held = held
        self.release = asyncio.Event()
        self.waiting = 0

    async def options(self, bundle: Any, instance_id: str, prop: str, props: dict[str, Any], page: int,
                      prev_context: Any, query: str | None, timeout_ms: int, account: str, bill_to: str) -> Any:
        if account in self.held:
            self.waiting += 1
            await self.release.wait()
        return await super().options(bundle, instance_id, prop, props, page, prev_context, query, timeout_ms,
                                     account, bill_to)


def test_options_past_a_namespaces_share_are_refused_while_another_namespaces_are_answered() -> None:
    w = world(tenant_runner_calls=2, tenant_runner_call_wait_s=0.3)
    ada, bob = (Principal(w.services.accounts.create_user(name, f"{name}@example.com", "paid")[0])
                for name in ("ada", "bob"))
    components = w.services.components
    runner = components.async_runner = HeldOptions(w.runner, {ada.user.id})
    w.runner.duration_ms = 300

    async def scenario() -> None:
        adas_component = await components.create(ada, component_code(configurable_props=PICK), None, None)
        bobs_component = await components.create(bob, component_code(configurable_props=PICK), None, None)

        def options(who: Principal, component: Any) -> Any:
            return components.options(who, component.id, "pick", {}, 0, None, None)
        held = [asyncio.create_task(options(ada, adas_component)) for _ in range(2)]
        while runner.waiting < 2:
            await asyncio.sleep(0.01)
        with pytest.raises(TenantBusy):
            await options(ada, adas_component)
        async with asyncio.timeout(5):
            assert await options(bob, bobs_component) == {"options": [], "context": None}
        runner.release.set()
        await asyncio.gather(*held)
    asyncio.run(scenario())
    assert w.runner.accounts.count(("options", ada.user.id)) == 2  # the refused call ran no code
    assert w.usage.totals(ada.user.id, utc_day(), utc_day()) == (0, 3 * 300)  # its describe and 2 options()
