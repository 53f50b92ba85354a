"""Prop validation and timers: every problem reported per prop."""

from __future__ import annotations

import pytest

from headwater.domain.props import step_problems, validate
from headwater.domain.timers import Timer, TimerError
from headwater.domain.workflows import evaluated_props

PROPS = [
    {"name": "http", "type": "$.interface.http", "customResponse": True},
    {"name": "db", "type": "$.service.db"},
    {"name": "timer", "type": "$.interface.timer", "default": {"intervalSeconds": 60}},
    {"name": "title", "type": "string"},
    {"name": "count", "type": "integer", "min": 1, "max": 10, "optional": True, "default": 5},
    {"name": "flag", "type": "boolean", "optional": True},
    {"name": "color", "type": "string", "options": ["red", {"label": "Blue", "value": "blue"}], "optional": True},
    {"name": "tags", "type": "string[]", "optional": True},
    {"name": "token", "type": "string", "secret": True, "optional": True},
    {"name": "github", "type": "app", "app": "github"},
    {"name": "extra", "type": "any", "optional": True},
]
AUTH = {"github": {"$auth": {"oauth_access_token": "t"}}}


def test_valid_values_and_defaults() -> None:
    v = validate(PROPS, {"title": "x", "color": "blue", "tags": ["a"], "token": "s", **AUTH})
    assert v.errors == {}
    assert v.values == {
        "timer": {"intervalSeconds": 60}, "title": "x", "count": 5, "color": "blue", "tags": ["a"],
        "token": "s", "github": {"$auth": {"oauth_access_token": "t"}},
    }
    assert v.http_props == ["http"] and v.db_props == ["db"]
    assert v.secret_props == ["token"] and v.app_props == ["github"]
    assert v.timers["timer"] == Timer(interval_seconds=60)


def test_a_components_own_default_need_not_be_one_of_its_options() -> None:
    # a registry component's shape (gorgias): an optional prop over its app's list of channels,
    # given `default: ""` (no filter), deployed without a value
    channel = {"name": "channel", "type": "string", "optional": True, "default": "", "options": ["api", "email"]}
    v = validate([channel], {})
    assert v.errors == {} and v.values == {"channel": ""}
    assert validate([channel], {"channel": ""}).errors == {"channel": ['"" is not one of the options ["api", "email"]']}
    assert validate([{**channel, "default": 3}], {}).errors == {"channel": ["must be a string"]}


def test_every_problem_reported() -> None:
    v = validate(PROPS, {
        "count": 11, "flag": "yes", "color": "green", "tags": "a", "nope": 1,
        "timer": {"intervalSeconds": 0}, "github": {"token": "x"},
    })
    assert v.errors == {
        "nope": ["is not a prop of this component"],
        "timer": ["intervalSeconds must be from 1 to 31622400"],
        "title": ["is required"],
        "count": ["must be at most 10"],
        "flag": ["must be true or false"],
        "color": ['"green" is not one of the options ["red", "blue"]'],
        "tags": ["must be an array of string values"],
        "github": ['must be an object {"authProvisionId": "apn_..."} naming a connected account, '
                   'or {"$auth": {...}} with the account\'s credentials'],
    }


def test_an_app_prop_may_name_a_connected_account() -> None:
    v = validate(PROPS, {"title": "x", "github": {"authProvisionId": "apn_abc"}})
    assert v.errors == {}
    assert v.values["github"] == {"authProvisionId": "apn_abc"}
    assert v.app_props == ["github"] and v.account_props == ["github"]
    for wrong in ({"authProvisionId": 7}, {"authProvisionId": "apn_abc", "$auth": {}}):
        assert "github" in validate(PROPS, {"title": "x", "github": wrong}).errors


@pytest.mark.parametrize("value", [{"title": 1}, {"title": True}, {"count": 2.5}, {"count": True}])
def test_wrong_types(value: dict) -> None:
    assert validate(PROPS, {"title": "x", **AUTH, **value}).errors


def test_value_over_64kb() -> None:
    v = validate(PROPS, {"title": "x" * (64 * 1024 + 1), **AUTH})
    assert v.errors == {"title": ["is over 64 KB"]}


def test_timers() -> None:
    assert Timer.parse({"intervalSeconds": 15}).response() == {"cron": None, "interval_seconds": 15}
    hourly = Timer.parse({"cron": "0 * * * *", "timezone": "Europe/Paris"})
    assert hourly.response() == {"cron": "0 * * * *", "interval_seconds": 3600}
    assert hourly.next_fire(0) == 3600
    assert Timer.parse({"intervalSeconds": 2}).next_fire(100.5) == 102.5
    every_2 = Timer.parse({"intervalSeconds": 2})
    assert every_2.next_after(100.0, 100.03) == 102.0, "a late wake-up does not shift the grid"
    assert every_2.next_after(100.0, 107.5) == 108.0, "missed ticks are skipped, not replayed"
    assert every_2.next_after(100.0, 102.0) == 104.0
    assert hourly.next_after(0, 5000) == 7200
    for bad in ({"intervalSeconds": 0}, {"intervalSeconds": -5}, {"intervalSeconds": "5"}, {"cron": "* * *"},
                {"cron": "61 * * * *"}, {"cron": "* * * * *", "timezone": "Mars/Olympus"}, {}, 5):
        with pytest.raises(TimerError):
            Timer.parse(bad)


def test_an_unresolved_expression_is_refused_where_a_number_or_object_belongs() -> None:
    props = [{"name": "n", "type": "integer"}, {"name": "o", "type": "object"}, {"name": "s", "type": "string"},
             {"name": "channel", "type": "$.discord.channel"}]
    v = validate(props, {"n": "{{steps.trigger.event.n}}", "o": "{{ steps.x }}", "s": "{{ kept as text }}",
                         "channel": "{{ text too }}"})
    assert v.errors == {"n": ["must be an integer, not an unresolved {{ }} expression"],
                        "o": ["must be an object, not an unresolved {{ }} expression"]}


def test_step_props_are_checked_once_evaluated() -> None:
    props = [{"name": "n", "type": "integer"}, {"name": "label", "type": "string", "optional": True}]
    given = {"n": "{{steps.trigger.event.n}}", "label": "{{steps.trigger.event.label}}"}
    assert step_problems(props, given) == {}  # at deploy: evaluated later
    assert step_problems(props, {"n": "4"}) == {"n": ["must be an integer"]}
    values, undefined = evaluated_props(given, {"n": 4})
    assert (values, undefined) == ({"n": 4}, ["label"])  # an optional prop left undefined, not "{{...}}"
    assert step_problems(props, values, undefined) == {}
    values, undefined = evaluated_props(given, {})
    assert step_problems(props, values, undefined) == {
        "n": ["is required, but its {{ }} expression gave undefined"]}
