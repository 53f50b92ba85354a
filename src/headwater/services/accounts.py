"""Users, orgs, API keys and the caller's identity (DECISIONS: Accounts, orgs, quotas)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from headwater.domain import ids
from headwater.domain.errors import Conflict, Forbidden, Invalid, NotFound, Unauthorized
from headwater.domain.models import Org, Principal, Tier, User
from headwater.domain.slugs import candidate_slugs, slugify
from headwater.ports import UnitOfWorkFactory, UsageRepository
from headwater.services.clock import now_s
from headwater.settings import Settings

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_USERNAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class Accounts:
    def __init__(self, uow: UnitOfWorkFactory, usage: UsageRepository, settings: Settings) -> None:
        self.uow = uow
        self.usage = usage
        self.settings = settings

    def create_user(self, username: str, email: str, tier: Tier = "free") -> tuple[User, str]:
        problems: dict[str, list[str]] = {}
        if not _USERNAME.match(username):
            problems["username"] = ["1 to 64 letters, digits, '.', '_' or '-'"]
        if not _EMAIL.match(email):
            problems["email"] = ["not an email address"]
        if tier not in ("free", "paid"):
            problems["tier"] = ["must be free or paid"]
        if problems:
            raise Invalid("The user is not valid.", problems)
        user = User(id=ids.new_id("user"), username=username, email=email, tier=tier, created_at=now_s())
        key = ids.new_api_key()
        try:
            with self.uow() as uow:
                uow.users.add(user)
                uow.keys.add(ids.hash_api_key(key), user.id, user.created_at)
                uow.commit()
        except Conflict:
            raise Conflict(f"A user named {username!r} exists already.", {"username": ["is taken"]},
                           field="username") from None
        return user, key

    def create_org(self, name: str, owner_id: str) -> Org:
        if not name.strip():
            raise Invalid("The org needs a name.", {"name": ["must not be empty"]})
        with self.uow(readonly=True) as uow:
            owner = uow.users.get(owner_id)
        if owner is None:
            raise NotFound(f"No user {owner_id}.")
        org_id = ids.new_id("org")
        for orgname in candidate_slugs(slugify(name)):
            org = Org(id=org_id, name=name, orgname=orgname, email=owner.email, owner_id=owner.id, created_at=now_s())
            try:
                with self.uow() as uow:
                    uow.orgs.add(org)
                    uow.orgs.add_member(org.id, owner.id)
                    uow.commit()
                return org
            except Conflict as e:
                if e.field != "orgname":
                    raise
        raise AssertionError("unreachable: candidate_slugs never ends")

    def add_member(self, org_id: str, user_id: str) -> None:
        with self.uow() as uow:
            if uow.orgs.get(org_id) is None:
                raise NotFound(f"No org {org_id}.")
            if uow.users.get(user_id) is None:
                raise NotFound(f"No user {user_id}.")
            uow.orgs.add_member(org_id, user_id)
            uow.commit()

    def create_key(self, user_id: str) -> str:
        key = ids.new_api_key()
        with self.uow() as uow:
            if uow.users.get(user_id) is None:
                raise NotFound(f"No user {user_id}.")
            uow.keys.add(ids.hash_api_key(key), user_id, now_s())
            uow.commit()
        return key

    def revoke_key(self, key: str) -> None:
        with self.uow() as uow:
            if not uow.keys.revoke(ids.hash_api_key(key), now_s()):
                raise NotFound("No active key matches.")
            uow.commit()

    def authenticate(self, key: str | None) -> Principal:
        if not key:
            raise Unauthorized("An `Authorization: Bearer <API key>` header is required.")
        with self.uow(readonly=True) as uow:
            user_id = uow.keys.user_for(ids.hash_api_key(key))
            user = uow.users.get(user_id) if user_id else None
            if user is None:
                raise Unauthorized("The API key is not valid.")
            return Principal(user=user, org_ids=uow.users.org_ids(user.id))

    def require_member(self, principal: Principal, org_id: str) -> None:
        """SPEC org rules 2 and 3: acting in an org needs membership (403 otherwise)."""
        if org_id not in principal.org_ids:
            raise Forbidden(f"You are not a member of org {org_id}.")

    def namespace(self, principal: Principal, org_id: str | None) -> str:
        if org_id:
            self.require_member(principal, org_id)
            return org_id
        return principal.user.id

    def profile(self, principal: Principal) -> dict[str, Any]:
        user = principal.user
        with self.uow(readonly=True) as uow:
            orgs = uow.orgs.for_user(user.id)
            today = datetime.now(UTC)
            day = today.strftime("%Y-%m-%d")
            if user.tier == "free":
                invocations, compute_ms = self.usage.totals(user.id, day, day)
                usage: dict[str, Any] = {
                    "daily_compute_time_quota": self.settings.free_daily_compute_ms,
                    "daily_compute_time_used": compute_ms,
                    "daily_invocations_quota": self.settings.free_daily_invocations,
                    "daily_invocations_used": invocations,
                }
            else:
                start = today.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
                end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
                    month=start.month + 1
                )
                invocations, _ = self.usage.totals(user.id, start.strftime("%Y-%m-%d"), day)
                usage = {
                    "billing_period_start_ts": int(start.timestamp()),
                    "billing_period_end_ts": int(end.timestamp()),
                    "billing_period_invocations": invocations,
                }
        return {
            "id": user.id,
            "username": user.username,
            "email": user.email,
            "orgs": [{"name": o.name, "id": o.id, "orgname": o.orgname, "email": o.email} for o in orgs],
            **usage,
        }
