"""Timers as EventBridge Scheduler expressions (pure: no I/O).

A timer's local meaning is croniter's (`Timer.next_fire`), so the AWS schedules must fire at the
same instants. The translation therefore works on *value sets*, not on text: each of the five
standard fields is validated against the standard grammar, expanded by croniter itself (so its
quirks, such as `7` = Sunday, `fri-mon` wrapping or `jan-jan` meaning every month, are kept),
and then written back in the one form AWS is sure to read the same way:

- Day of week is written with NAMES (`SUN,MON-FRI`). AWS numbers days 1-7 from Sunday where
  cron numbers them 0-7 from Sunday (0 and 7 both Sunday), so a copied number is a day off;
  names cannot be. AWS also takes no step (`/`) in day of week and its wrapping ranges are
  undocumented, so steps and wraps come out as explicit name lists.
- Other fields come out as `*`, a step to the field's end (`0/15`), or a list of values and
  ascending ranges: forms every Quartz-style parser reads alike.
- AWS requires exactly one of day-of-month and day-of-week to be `?`. When cron leaves one of
  them unrestricted (croniter expands it to `*`), that one becomes `?`. When both are
  restricted, cron fires on days matching EITHER field (`0 0 13 * 5`: every 13th and every
  Friday), and one AWS expression can only say "dom" or "dow". So such a timer becomes TWO
  schedules, suffixes "dom" and "dow", whose union is the cron schedule. On days matching both
  (Friday the 13th) both fire at the same minute: consumers must treat (source, due time) as
  the identity of a tick, as they must anyway since Scheduler delivers at least once.

Known difference left as is: at daylight-saving changes AWS skips wall-clock times that do not
exist and fires once in the repeated hour, where croniter moves a skipped time to the first
valid minute and fires in both copies of the repeated hour. Only times inside the changing
hour are affected (e.g. `30 2 * * *` in Europe/Paris).

Intervals become `rate(N unit)` when they are whole minutes; shorter or odd ones (90 s) cannot
be said in AWS's one-minute grain and return None: the adapter runs those as an SQS chain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from croniter import croniter

from headwater.domain.timers import Timer

MAX_EXPRESSION_LENGTH = 256  # CreateSchedule's limit on ScheduleExpression
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # index = cron number (0 = Sunday)
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"
_FIELDS = (  # (name, lowest, highest, the names the field takes)
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
MINUTE, HOUR, DOM, MONTH, DOW = range(5)


@dataclass(frozen=True)
class AwsSchedule:
    """One EventBridge schedule: its name suffix ("" when the timer needs only one),
    ScheduleExpression and ScheduleExpressionTimezone."""

    suffix: str
    expression: str
    timezone: str


def aws_schedules(timer: Timer) -> list[AwsSchedule] | None:
    """The schedules whose union fires when `timer` does, or None when no rate() or cron() can
    (intervals under a minute or not whole minutes). ValueError for cron AWS cannot take."""
    if timer.cron is None:
        rate = rate_expression(timer.interval_seconds)
        return None if rate is None else [AwsSchedule("", rate, timer.timezone)]
    return [AwsSchedule(suffix, expression, timer.timezone) for suffix, expression in cron_expressions(timer.cron)]


def rate_expression(seconds: int) -> str | None:
    """`rate(N minutes|hours|days)` in the largest unit that divides evenly; singular for 1."""
    if seconds < 60 or seconds % 60:
        return None
    minutes = seconds // 60
    for unit, size in (("day", 1440), ("hour", 60), ("minute", 1)):
        if minutes % size == 0:
            count = minutes // size
            return f"rate({count} {unit}{'' if count == 1 else 's'})"
    raise AssertionError("unreachable: minutes always divide")


def cron_expressions(expression: str) -> list[tuple[str, str]]:
    """(suffix, `cron(...)`) pairs for a standard 5-field cron; two when day-of-month and
    day-of-week are both restricted (cron ORs them, one AWS expression cannot)."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"cron {expression!r} must have 5 fields (minute hour day-of-month month day-of-week)")
    for text, (name, _, _, names) in zip(fields, _FIELDS, strict=True):
        _check_standard(text, name, names)
    try:
        expanded, nth = croniter.expand(expression)
    except Exception as exc:  # croniter's errors are ValueErrors, KeyErrors or worse
        raise ValueError(f"cron {expression!r} is not valid: {exc}") from exc
    if nth:  # unreachable after _check_standard ('#' is refused), kept as the contract
        raise ValueError(f"cron {expression!r}: nth weekday ('#') is not standard cron")

    minute, hour, month = (_field(expanded[i], *_FIELDS[i][1:3]) for i in (MINUTE, HOUR, MONTH))
    dom_all, dow_all = expanded[DOM] == ["*"], expanded[DOW] == ["*"]
    dom = "*" if dom_all else _field(expanded[DOM], 1, 31)
    dow = "*" if dow_all else _days(expanded[DOW])

    def one(dom_part: str, dow_part: str) -> str:
        result = f"cron({minute} {hour} {dom_part} {month} {dow_part} *)"
        if len(result) > MAX_EXPRESSION_LENGTH:  # cannot happen with 5 standard fields; said rather than assumed
            raise ValueError(f"cron {expression!r} is longer than AWS allows ({MAX_EXPRESSION_LENGTH}) as {result}")
        return result

    if dow_all:
        return [("", one(dom, "?"))]
    if dom_all:
        return [("", one("?", dow))]
    # croniter ORs the two restricted day fields; a side that matches every day makes the OR every day
    if len(expanded[DOM]) == 31 or len({int(d) % 7 for d in expanded[DOW]}) == 7:
        return [("", one("*", "?"))]
    return [("dom", one(dom, "?")), ("dow", one("?", dow))]


def _check_standard(text: str, name: str, names: str | None) -> None:
    """Only standard cron: numbers (names in month and day of week), `*`, ranges, lists and steps.
    croniter also takes `L`, `W`, `#`, `?` and `H`, which AWS either lacks or reads differently."""
    value = rf"(?:\d+|{names})" if names else r"\d+"
    item = rf"(?:\*|{value}(?:-{value})?)(?:/\d+)?"
    if not re.fullmatch(rf"{item}(?:,{item})*", text, flags=re.IGNORECASE):
        raise ValueError(f"cron {name} field {text!r} is not standard 5-field cron (no L, W, #, ?, H)")


def _field(values: list[int | str], lowest: int, highest: int) -> str:
    """`*`, `start/step` when the values step evenly to the field's end, else values and ranges."""
    if values == ["*"]:
        return "*"
    ints = sorted({int(v) for v in values})
    if len(ints) == highest - lowest + 1:
        return "*"
    listed = _runs([str(v) for v in ints], ints)
    if len(ints) >= 3:
        step = ints[1] - ints[0]
        if all(b - a == step for a, b in zip(ints, ints[1:], strict=False)) and ints[-1] + step > highest:
            stepped = f"{ints[0]}/{step}"
            if len(stepped) < len(listed):
                return stepped
    return listed


def _days(values: list[int | str]) -> str:
    """Day-of-week values (0-7, Sunday 0 and 7) as AWS day names, Sunday first, never wrapping."""
    days = sorted({int(v) % 7 for v in values})
    return _runs([DAY_NAMES[d] for d in days], days)


def _runs(labels: list[str], values: list[int]) -> str:
    """A comma list where three or more consecutive values become `first-last`."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            if i - start >= 3:
                parts.append(f"{labels[start]}-{labels[i - 1]}")
            else:
                parts.extend(labels[start:i])
            start = i
    return ",".join(parts)
