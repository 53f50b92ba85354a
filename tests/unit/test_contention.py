"""Conditional writes that lost a race (services/contention.py): `retry_on_conflict` tries again
only on a Conflict on its field, pauses between attempts (not after the last), and raises the
caller's own error once every try has lost."""

from __future__ import annotations

import pytest

from headwater.domain.errors import Conflict, NotFound
from headwater.services.contention import retry_on_conflict


class GaveUp(Exception):
    pass


class Attempts:
    """An attempt that loses the race `losses` times (Conflict on `field`), then returns its number."""

    def __init__(self, losses: int, field: str | None = "version") -> None:
        self.losses = losses
        self.field = field
        self.seen: list[int] = []

    def __call__(self, n: int) -> str:
        self.seen.append(n)
        if len(self.seen) <= self.losses:
            raise Conflict("another writer saved first", field=self.field)
        return f"saved on attempt {n}"


class Pauses:
    def __init__(self) -> None:
        self.after: list[int] = []

    def __call__(self, lost: int) -> None:
        self.after.append(lost)


def test_a_lost_race_is_tried_again_after_a_pause_until_it_is_won() -> None:
    attempt, pauses = Attempts(losses=2), Pauses()
    assert retry_on_conflict(attempt, 5, GaveUp, pause=pauses) == "saved on attempt 2"
    assert attempt.seen == [0, 1, 2]
    assert pauses.after == [0, 1]


def test_a_first_win_neither_retries_nor_pauses() -> None:
    attempt, pauses = Attempts(losses=0), Pauses()
    assert retry_on_conflict(attempt, 5, GaveUp, pause=pauses) == "saved on attempt 0"
    assert attempt.seen == [0]
    assert pauses.after == []


def test_after_tries_lost_races_the_callers_error_is_raised_without_a_last_pause() -> None:
    attempt, pauses = Attempts(losses=99), Pauses()
    with pytest.raises(GaveUp):
        retry_on_conflict(attempt, 4, GaveUp, pause=pauses)
    assert attempt.seen == [0, 1, 2, 3]
    assert pauses.after == [0, 1, 2]


def test_the_last_try_may_still_win() -> None:
    attempt = Attempts(losses=3)
    assert retry_on_conflict(attempt, 4, GaveUp, pause=None) == "saved on attempt 3"


def test_a_conflict_on_another_field_passes_through_untried() -> None:
    attempt = Attempts(losses=1, field="name_slug")
    with pytest.raises(Conflict) as raised:
        retry_on_conflict(attempt, 5, GaveUp, pause=None)
    assert raised.value.field == "name_slug"
    assert attempt.seen == [0]


def test_the_field_tried_again_is_the_callers() -> None:
    attempt = Attempts(losses=1, field="delivery")
    assert retry_on_conflict(attempt, 5, GaveUp, field="delivery", pause=None) == "saved on attempt 1"


def test_other_errors_pass_through_untried() -> None:
    seen: list[int] = []

    def attempt(n: int) -> str:
        seen.append(n)
        raise NotFound("gone")

    with pytest.raises(NotFound):
        retry_on_conflict(attempt, 5, GaveUp, pause=None)
    assert seen == [0]


def test_the_default_pause_backs_off_between_attempts() -> None:
    attempt = Attempts(losses=2)
    assert retry_on_conflict(attempt, 3, GaveUp) == "saved on attempt 2"
