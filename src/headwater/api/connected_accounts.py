"""Connected accounts (`apn_`, DECISIONS Accounts): an app's credentials kept once, sealed, and
named by app props as `{"authProvisionId": "apn_..."}`. No answer carries a credential's value:
an account says which fields it holds, its kind, status and expiry."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from headwater.api.deps import PagingDep, PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Page, Shape, answers
from headwater.services.connected_accounts import AccountChange

router = Router(tags=["accounts"])

CREDENTIALS_EXAMPLE = {"api_key": "sk_live_...", "region": "eu"}


class ConnectedAccount(Shape):
    id: str = Field(description="`apn_` identifier: give it to an app prop as `{\"authProvisionId\": \"apn_...\"}`.")
    app: str = Field(description="The app's name slug (an app prop's `app`).", examples=["slack"])
    name: str
    kind: Literal["keys", "oauth"] = Field(description="`keys`: credentials given by the user (API keys); "
                                           "`oauth`: tokens of an OAuth 2.0 connection.")
    status: Literal["active", "needs_reconnect"] = Field(
        description="`needs_reconnect`: its OAuth tokens cannot be refreshed any more; sources using it fail "
        "with ACCOUNT_NEEDS_RECONNECT until it is connected again.")
    fields: list[str] = Field(description="The names of its credential fields (the keys of `$auth`); never "
                              "their values.", examples=[["api_key", "region"]])
    expires_at: int | None = Field(description="When its OAuth access token expires (Unix seconds); null for "
                                   "credentials that do not.")
    owner_id: str = Field(description="The user (`u_`) or org (`o_`) that owns it.")
    created_at: int
    updated_at: int


class CreateAccountBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: StrictStr = Field(description="The app's name slug, as the components' app props name it.",
                           examples=["slack"])
    name: StrictStr | None = Field(None, description="Defaults to the app's slug.", examples=["Work Slack"])
    credentials: dict[str, Any] | None = Field(
        None, description="The `$auth` fields the app's components read: strings, numbers or booleans. "
        "Kept encrypted; never answered.", examples=[CREDENTIALS_EXAMPLE])
    org_id: StrictStr | None = Field(None, description="The owning org (also a query parameter).")
    include: StrictStr | None = Field(None, description="Top-level fields of the answer to keep, comma-separated.")
    exclude: StrictStr | None = Field(None, description="Top-level fields of the answer to drop, comma-separated.")


class UpdateAccountBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr | None = Field(None, examples=["Work Slack"])
    credentials: dict[str, Any] | None = Field(
        None, description="A JSON merge patch of the credentials: a field given replaces its value, a null "
        "removes the field, fields not given stay. The sources using the account see the new values "
        "from their next run.", examples=[{"api_key": "sk_live_new...", "region": None}])
    include: StrictStr | None = None
    exclude: StrictStr | None = None


@router.post("/accounts", response_model=None,
             responses={**answers(Data[ConnectedAccount]), **error_responses(403, 422)})
def create_account(body: CreateAccountBody, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep,
                   org_id: str | None = Query(None, description="The owning org.")) -> dict[str, Any]:
    """Connects an account of an app that takes keys (API keys, tokens, a host...): the credentials
    are stored encrypted, and answered never again."""
    account = svc.connected_accounts.create(caller, body.app, body.name, body.credentials, org_id or body.org_id)
    return shape.with_body(body).data(account.to_api())


@router.get("/accounts", response_model=None, responses={**answers(Page[ConnectedAccount]), **error_responses(403)})
def list_accounts(svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep,
                  org_id: str | None = Query(None, description="Only this org's accounts.")
                  ) -> dict[str, Any]:
    """Every account the caller may use, newest first: the caller's own and those of the caller's
    orgs (`owner_id` says whose); with `org_id`, one org's."""
    page = (svc.connected_accounts.list(caller, org_id, paging) if org_id
            else svc.connected_accounts.usable(caller, paging))
    return shape.page(page, [a.to_api() for a in page.items])


@router.get("/users/me/accounts", response_model=None, responses=answers(Page[ConnectedAccount]))
def list_my_accounts(svc: ServicesDep, caller: PrincipalDep, paging: PagingDep, shape: ShapeDep) -> dict[str, Any]:
    """The caller's own accounts (not the orgs'), newest first."""
    page = svc.connected_accounts.list(caller, None, paging)
    return shape.page(page, [a.to_api() for a in page.items])


@router.get("/orgs/{org_id}/accounts", response_model=None,
            responses={**answers(Page[ConnectedAccount]), **error_responses(403)})
def list_org_accounts(org_id: str, svc: ServicesDep, caller: PrincipalDep, paging: PagingDep,
                      shape: ShapeDep) -> dict[str, Any]:
    page = svc.connected_accounts.list(caller, org_id, paging)
    return shape.page(page, [a.to_api() for a in page.items])


# Routes of a fixed name under /accounts (`/accounts/connect`) must be added above this one: the
# first route whose path matches answers.
@router.get("/accounts/{account_id}", response_model=None,
            responses={**answers(Data[ConnectedAccount]), **error_responses(404)})
def get_account(account_id: str, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    return shape.data(svc.connected_accounts.get(caller, account_id).to_api())


@router.patch("/accounts/{account_id}", response_model=None,
              responses={**answers(Data[ConnectedAccount]), **error_responses(404, 409, 422)})
def update_account(account_id: str, body: UpdateAccountBody, svc: ServicesDep, caller: PrincipalDep,
                   shape: ShapeDep) -> dict[str, Any]:
    """Renames the account or changes its credentials."""
    account = svc.connected_accounts.update(caller, account_id, AccountChange(body.name, body.credentials))
    return shape.with_body(body).data(account.to_api())


@router.delete("/accounts/{account_id}", status_code=204, response_class=Response,
               responses=error_responses(404))
def delete_account(account_id: str, svc: ServicesDep, caller: PrincipalDep) -> Response:
    """The sources using it fail their next runs with an `$errors` event `ACCOUNT_NOT_FOUND` until
    they are given another account."""
    svc.connected_accounts.delete(caller, account_id)
    return Response(status_code=204)
