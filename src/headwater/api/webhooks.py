"""Webhooks and their deliveries (SPEC Webhooks, DECISIONS Webhook deliveries)."""

from __future__ import annotations

from typing import Any

from fastapi import Query, Response

from headwater.api.deps import PagingDep, PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Delivery, Page, Webhook, answers

router = Router(tags=["webhooks"])


@router.post("/webhooks", response_model=None, responses=answers(Data[Webhook]))
def create_webhook(svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep,
                   url: str = Query(description="Where deliveries are POSTed: http or https, a host name, any path "
                                    "and port.", examples=["https://example.com/hook"]),
                   name: str | None = Query(None, examples=["orders hook"]),
                   description: str | None = Query(None, examples=["new orders to the shop's backend"]),
                   org_id: str | None = Query(None, description="The owning org.")) -> dict[str, Any]:
    """The answer carries `signing_secret` (`whsec_...`) this once: deliveries are signed with it."""
    webhook, secret = svc.webhooks.create(caller, url, name, description, org_id)
    return shape.data({**webhook.to_api(include_user=True), "signing_secret": secret})


@router.get("/users/me/webhooks", response_model=None, responses=answers(Page[Webhook]))
def my_webhooks(svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep) -> dict[str, Any]:
    page = svc.webhooks.listing(caller, None, paging)
    return shape.page(page, [w.to_api() for w in page.items])


@router.delete("/webhooks/{webhook_id}", status_code=204, response_class=Response)
def delete_webhook(webhook_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    svc.webhooks.delete(caller, webhook_id)
    return Response(status_code=204)


@router.get("/webhooks/{webhook_id}/deliveries", response_model=None, responses=answers(Page[Delivery]))
def webhook_deliveries(webhook_id: str, svc: ServicesDep, caller: PrincipalDep, paging: PagingDep,
                       shape: ShapeDep) -> dict[str, Any]:
    page = svc.webhooks.deliveries(caller, webhook_id, paging)
    return shape.page(page, [d.to_api() for d in page.items])


@router.post("/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", status_code=202, response_model=None,
             responses={**answers(Data[Delivery], 202, "Accepted: one more attempt is queued."),
                        **error_responses(409)})
def retry_delivery(webhook_id: str, delivery_id: str, svc: ServicesDep, caller: PrincipalDep,
                   shape: ShapeDep) -> dict[str, Any]:
    """One more attempt, queued now (202); it shows in the delivery's attempts once made."""
    return shape.data(svc.webhooks.retry(caller, webhook_id, delivery_id).to_api())
