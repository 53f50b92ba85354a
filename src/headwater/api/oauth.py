"""OAuth 2.0 for connected accounts (issue 22, part B): apps' OAuth clients, the connect flow
and the redirect back from the provider (docs/oauth.md).

`POST /v1/oauth/connect` answers the provider's authorize URL for the caller to open; the
provider sends the browser back to `GET /v1/oauth/callback`, which needs no API key: its `state`
(random, single use, expiring in 10 minutes, known only to the caller who started the connect)
says whose connect it completes."""

from __future__ import annotations

import html
from typing import Any

from fastapi import Query, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from headwater.api.deps import PrincipalDep, ServicesDep, ShapeDep
from headwater.api.errors import error_responses
from headwater.api.routing import Router
from headwater.api.schemas import Data, Shape, answers
from headwater.bootstrap import Services
from headwater.domain.errors import HeadwaterError
from headwater.domain.oauth import CONNECT_TTL_S
from headwater.services.oauth import EXCHANGES_PER_TENANT
from headwater.services.tenant_slots import TenantBusy

router = Router(tags=["oauth"])


class OAuthClientBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    client_id: StrictStr = Field(description="The client id the provider gave you.")
    client_secret: StrictStr | None = Field(None, description="Stored encrypted, never answered; null for a public "
                                            "client (PKCE alone).")
    authorize_url: StrictStr = Field(description="The provider's authorization endpoint. Its query may carry "
                                     "the provider's own parameters (e.g. `audience`) but none of Headwater's "
                                     "(`response_type`, `client_id`, `redirect_uri`, `state`, `code_challenge`, "
                                     "`code_challenge_method`, `scope`: 422 naming them), and no fragment.",
                                     examples=["https://github.com/login/oauth/authorize"])
    token_url: StrictStr = Field(description="The provider's token endpoint (the URL policy applies to it, as to "
                                 "webhooks).", examples=["https://github.com/login/oauth/access_token"])
    scopes: list[StrictStr] = Field(default_factory=list, examples=[["repo", "read:user"]])
    extra_params: dict[str, StrictStr] = Field(
        default_factory=dict, description="More parameters of the authorize URL (e.g. `prompt`, `access_type`); "
                                          "none of Headwater's (see `authorize_url`).",
        examples=[{"prompt": "consent"}])


class OAuthClient(Shape):
    app: str
    owner_id: str | None = Field(description="The user or org it belongs to; null for the operator's, which "
                                 "serves everybody without a client of their own.")
    client_id: str
    has_client_secret: bool
    authorize_url: str
    token_url: str
    scopes: list[str]
    extra_params: dict[str, str]
    updated_at: int


class ConnectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: StrictStr | None = Field(None, description="The app to connect an account of (a new account).",
                                  examples=["github"])
    account_id: StrictStr | None = Field(None, description="An OAuth account to reconnect (`apn_...`): it keeps "
                                         "its id, and sources using it go on.")
    name: StrictStr | None = Field(None, description="The new account's name (defaults to the app).")
    org_id: StrictStr | None = Field(None, description="The org that will own the new account.")


class Connect(Shape):
    authorize_url: str = Field(description="Open it in a browser: the provider asks the user, then sends the "
                               "browser to `redirect_uri`, which creates or renews the account.")
    state: str = Field(description="The connect's id: single use, bound to the caller.")
    expires_at: int = Field(description=f"Unix seconds; the connect must be completed within {CONNECT_TTL_S} s.")
    redirect_uri: str = Field(description="Headwater's callback, to register with the provider.")


def _owner(svc: Any, caller: Any, org_id: str | None) -> str:
    return str(svc.accounts.namespace(caller, org_id))


@router.get("/oauth/clients", response_model=None, responses=answers(Data[list[OAuthClient]]))
def list_clients(svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep,
                 org_id: str | None = Query(None)) -> dict[str, Any]:
    """The OAuth clients the caller's connects use: their own, and the operator's for other apps."""
    return shape.data([c.to_api() for c in svc.oauth.clients(_owner(svc, caller, org_id))])


@router.put("/oauth/clients/{app}", response_model=None,
            responses={**answers(Data[OAuthClient]), **error_responses(422)})
def set_client(app: str, body: OAuthClientBody, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep,
               org_id: str | None = Query(None)) -> dict[str, Any]:
    """Your own (or your org's) OAuth client for an app, used instead of the operator's."""
    client = svc.oauth.set_client(_owner(svc, caller, org_id), app, body.model_dump())
    return shape.data(client.to_api())


@router.delete("/oauth/clients/{app}", status_code=204, response_class=Response)
def delete_client(app: str, svc: ServicesDep, caller: PrincipalDep, org_id: str | None = Query(None)) -> Response:
    svc.oauth.remove_client(_owner(svc, caller, org_id), app)
    return Response(status_code=204)


@router.post("/oauth/connect", status_code=201, response_model=None,
             responses={**answers(Data[Connect], 201, "Created: open `authorize_url`."), **error_responses(404, 422)})
def connect(body: ConnectBody, svc: ServicesDep, caller: PrincipalDep, shape: ShapeDep) -> dict[str, Any]:
    """Starts connecting an account of `app` with OAuth, or reconnecting `account_id`."""
    if body.account_id is not None:
        account = svc.connected_accounts.get(caller, body.account_id)
        started = svc.oauth.start(caller, account.owner, account.app, account.name, account)
    else:
        started = svc.oauth.start(caller, _owner(svc, caller, body.org_id), body.app, body.name)
    return shape.data({"authorize_url": started.authorize_url, "state": started.state,
                       "expires_at": started.expires_at, "redirect_uri": started.redirect_uri})


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Headwater: {title}</title></head>
<body><h1>{title}</h1><p>{text}</p></body></html>"""
_HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}


@router.get("/oauth/callback", response_class=HTMLResponse, include_in_schema=True,
            responses={200: {"description": "The account is connected.", **_HTML},
                       400: {"description": "Unknown, used or expired state, or the provider refused.", **_HTML},
                       422: {"description": "The provider refused the authorization code.", **_HTML},
                       503: {"description": "The provider's token endpoint failed or did not answer in time "
                             "(start the connect again), or too many connects of the same user or org were under "
                             f"way ({EXCHANGES_PER_TENANT} at once; with `Retry-After`: the same callback may be "
                             "sent again).", **_HTML}})
async def callback(request: Request, state: str = Query(""), code: str | None = Query(None),
                   error: str | None = Query(None)) -> HTMLResponse:
    """Where the provider sends the browser back (no API key: the `state` says whose connect it is).
    The code exchange is bounded as a whole (`HEADWATER_OAUTH_TOKEN_TIMEOUT_S`) and waits holding
    no request thread; at most a few of one user's or org's are under way at once."""
    svc: Services = request.app.state.services
    headers = {"Cache-Control": "no-store"}
    try:
        account = await svc.oauth.complete(state, code, error)
    except HeadwaterError as e:
        if isinstance(e, TenantBusy):
            headers["Retry-After"] = str(e.retry_after)
        page = _PAGE.format(title="the account was not connected", text=html.escape(e.message))
        return HTMLResponse(page, status_code=e.status, headers=headers)
    text = (f"The {html.escape(account.app)} account {html.escape(account.name)} ({account.id}) is connected. "
            "You can close this window.")
    return HTMLResponse(_PAGE.format(title="account connected", text=text), headers=headers)
