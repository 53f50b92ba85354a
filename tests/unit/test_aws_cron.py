"""Timers as EventBridge Scheduler expressions: the translated schedules must fire exactly when
croniter (the local meaning of a timer, `Timer.next_fire`) does. The AWS side is checked by a
small evaluator of AWS cron written here from AWS's documented syntax, not by the translator's
own code, so a shared misreading cannot hide."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from headwater.domain.aws_cron import AwsSchedule, aws_schedules
from headwater.domain.timers import Timer

# --- an evaluator of AWS cron(minutes hours day-of-month month day-of-week year) ---------------

AWS_DAYS = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), start=1)}
AWS_MONTHS = {
    name: n
    for n, name in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1)
}
# (lowest, highest, names, the wildcards AWS documents for the field)
AWS_FIELDS: tuple[tuple[int, int, dict[str, int], str], ...] = (
    (0, 59, {}, ",-*/"),
    (0, 23, {}, ",-*/"),
    (1, 31, {}, ",-*?/"),  # (L and W too; the translator never writes them)
    (1, 12, AWS_MONTHS, ",-*/"),
    (1, 7, AWS_DAYS, ",-*?"),  # no '/' in day of week (L and # too, unused)
    (1970, 2199, {}, ",-*/"),
)


@dataclass(frozen=True)
class AwsCron:
    """The values of each field; None for `?` (no restriction, the other day field decides)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int] | None
    months: frozenset[int]
    weekdays: frozenset[int] | None  # AWS numbers: 1 = Sunday ... 7 = Saturday
    years: frozenset[int]

    def matches_day(self, day: date) -> bool:
        aws_weekday = (day.weekday() + 1) % 7 + 1  # Python: Monday 0 ... Sunday 6
        return (
            day.month in self.months
            and day.year in self.years
            and (self.days is None or day.day in self.days)
            and (self.weekdays is None or aws_weekday in self.weekdays)
        )


def parse_aws_field(text: str, index: int) -> frozenset[int] | None:
    lowest, highest, names, wildcards = AWS_FIELDS[index]
    assert set(re.sub(r"[0-9A-Z]", "", text)) <= set(wildcards), f"{text!r}: a wildcard AWS refuses in field {index}"
    if text == "?":
        return None
    assert "?" not in text

    def value(token: str) -> int:
        number = names[token] if token in names else int(token)
        assert lowest <= number <= highest, f"{token} out of range in field {index}"
        return number

    values: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        assert step >= 1
        if base == "*":
            first, last = lowest, highest
        elif "-" in base:
            first, last = (value(t) for t in base.split("-"))
            assert first <= last, f"{item!r}: AWS ranges written here must not wrap"
        else:
            first = value(base)
            last = highest if step_text else first  # `a/n`: from a to the field's end
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse_aws_cron(expression: str) -> AwsCron:
    match = re.fullmatch(r"cron\((.*)\)", expression)
    assert match, expression
    fields = match.group(1).split(" ")
    assert len(fields) == 6, expression
    assert (fields[2] == "?") != (fields[4] == "?"), f"{expression}: exactly one day field must be '?'"
    parsed = [parse_aws_field(text, i) for i, text in enumerate(fields)]
    minutes, hours, days, months, weekdays, years = parsed
    assert minutes is not None and hours is not None and months is not None and years is not None
    return AwsCron(minutes, hours, days, months, weekdays, years)


def aws_local_to_utc(wall: datetime, zone: ZoneInfo) -> float | None:
    """AWS's documented DST rule: a wall time that does not exist is skipped; one that occurs
    twice fires once (here: the first time)."""
    first = wall.replace(tzinfo=zone, fold=0)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return first.timestamp()


def aws_fires(cron: AwsCron, zone: ZoneInfo, after: float) -> Iterator[float]:
    """Fire times strictly after `after`, in order, field-wise: matching days, then hours, minutes."""
    day = datetime.fromtimestamp(after, zone).date() - timedelta(days=1)
    for _ in range(366 * 30):
        if cron.matches_day(day):
            times = (
                aws_local_to_utc(datetime(day.year, day.month, day.day, h, m), zone)
                for h in sorted(cron.hours)
                for m in sorted(cron.minutes)
            )
            yield from sorted(t for t in times if t is not None and t > after)
        day += timedelta(days=1)


def aws_next_fires(schedules: list[AwsSchedule], after: float, count: int) -> list[float]:
    """The union of the schedules' fire times (distinct instants)."""
    found: set[float] = set()
    for schedule in schedules:
        fires = aws_fires(parse_aws_cron(schedule.expression), ZoneInfo(schedule.timezone), after)
        found.update(next(fires) for _ in range(count))
    return sorted(found)[:count]


def cron_next_fires(timer: Timer, after: float, count: int) -> list[float]:
    fires = []
    for _ in range(count):
        after = timer.next_fire(after)
        fires.append(after)
    return fires


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


STARTS = [
    stamp(s)
    for s in (
        "2024-01-01T00:00:00+00:00",
        "2024-02-28T23:59:30+00:00",  # into a leap day
        "2024-07-14T13:07:42.5+00:00",
        "2025-03-31T23:59:59+00:00",  # a 30-day month next
        "2025-12-31T23:45:00+00:00",  # across a year end
    )
]

# --- same fire times ---------------------------------------------------------------------------

CASES = [  # (cron, timezone, expected AWS expressions)
    ("* * * * *", "UTC", ["cron(* * * * ? *)"]),
    ("*/15 * * * *", "UTC", ["cron(0/15 * * * ? *)"]),
    ("0 9 * * 1-5", "UTC", ["cron(0 9 ? * MON-FRI *)"]),
    ("30 2 1 * *", "UTC", ["cron(30 2 1 * ? *)"]),
    ("0 0 * * 0", "UTC", ["cron(0 0 ? * SUN *)"]),
    ("0 0 * * 7", "UTC", ["cron(0 0 ? * SUN *)"]),
    ("15 10 * jan,jul *", "UTC", ["cron(15 10 * 1,7 ? *)"]),
    ("0 */6 * * *", "UTC", ["cron(0 0/6 * * ? *)"]),
    ("0 12 1,15 * *", "UTC", ["cron(0 12 1,15 * ? *)"]),
    ("0 8 * * mon-fri", "UTC", ["cron(0 8 ? * MON-FRI *)"]),
    ("5 4 * * sun", "UTC", ["cron(5 4 ? * SUN *)"]),
    ("0 0 13 * 5", "UTC", ["cron(0 0 13 * ? *)", "cron(0 0 ? * FRI *)"]),
    ("0-30/10 * * * *", "UTC", ["cron(0,10,20,30 * * * ? *)"]),
    ("0 22 * * 1-5/2", "UTC", ["cron(0 22 ? * MON,WED,FRI *)"]),
    ("0 9 * * 6,0", "UTC", ["cron(0 9 ? * SUN,SAT *)"]),
    ("0 9 * * 1-5", "Europe/Paris", ["cron(0 9 ? * MON-FRI *)"]),
    ("30 17 * * 0-7", "America/New_York", ["cron(30 17 * * ? *)"]),
    ("0 0 * * fri-mon", "UTC", ["cron(0 0 ? * SUN,MON,FRI,SAT *)"]),
    ("0 0 * * 5-1", "UTC", ["cron(0 0 ? * SUN,MON,FRI,SAT *)"]),
    ("0 0 * apr-jan *", "UTC", ["cron(0 0 * 1,4-12 ? *)"]),
    ("0 0 * * */2", "UTC", ["cron(0 0 ? * SUN,TUE,THU,SAT *)"]),
    ("0 0 */2 * *", "UTC", ["cron(0 0 1/2 * ? *)"]),
    ("0 6 */10 * 1", "UTC", ["cron(0 6 1/10 * ? *)", "cron(0 6 ? * MON *)"]),
    ("0 0 1-31 * 1", "UTC", ["cron(0 0 * * ? *)"]),  # OR with every day is every day
    ("5/10 * * * *", "UTC", ["cron(5/10 * * * ? *)"]),
    ("*/7 9-17 * * *", "UTC", ["cron(0/7 9-17 * * ? *)"]),
    ("0 0 31 * *", "UTC", ["cron(0 0 31 * ? *)"]),
    ("45 23 * */3 6-7", "Asia/Kolkata", ["cron(45 23 ? 1/3 SUN,SAT *)"]),
    ("0 12 * * 1-5", "Australia/Lord_Howe", ["cron(0 12 ? * MON-FRI *)"]),  # a 30-minute DST shift
]


@pytest.mark.parametrize(("cron", "zone", "expressions"), CASES)
def test_translation_fires_when_croniter_does(cron: str, zone: str, expressions: list[str]) -> None:
    timer = Timer(interval_seconds=60, cron=cron, timezone=zone)
    schedules = aws_schedules(timer)
    assert schedules is not None
    assert [s.expression for s in schedules] == expressions
    assert all(s.timezone == zone for s in schedules)
    assert [s.suffix for s in schedules] == ([""] if len(schedules) == 1 else ["dom", "dow"])
    for start in STARTS:
        assert aws_next_fires(schedules, start, 20) == cron_next_fires(timer, start, 20), (cron, start)


def test_timezone_across_dst_changes() -> None:
    """Weekdays at 9:00 in Paris stay at 9:00 local through both changes (UTC 8:00 then 7:00)."""
    timer = Timer(interval_seconds=60, cron="0 9 * * 1-5", timezone="Europe/Paris")
    schedules = aws_schedules(timer)
    assert schedules == [AwsSchedule("", "cron(0 9 ? * MON-FRI *)", "Europe/Paris")]
    for start in ("2024-03-27T12:00:00+00:00", "2024-10-24T12:00:00+00:00"):
        fires = aws_next_fires(schedules, stamp(start), 20)
        assert fires == cron_next_fires(timer, stamp(start), 20)
        utc_hours = {datetime.fromtimestamp(f, UTC).hour for f in fires}
        assert utc_hours == {7, 8}
        assert {datetime.fromtimestamp(f, ZoneInfo("Europe/Paris")).hour for f in fires} == {9}


def test_both_day_fields_fire_on_either_and_twice_on_both() -> None:
    """`0 0 13 * 5`: every 13th and every Friday; on Friday the 13th both schedules fire, which is
    why a tick's identity is (source, due time)."""
    timer = Timer(interval_seconds=60, cron="0 0 13 * 5", timezone="UTC")
    schedules = aws_schedules(timer)
    assert schedules is not None and len(schedules) == 2
    start = stamp("2024-09-01T00:00:00+00:00")
    fires = aws_next_fires(schedules, start, 12)
    days = [datetime.fromtimestamp(f, UTC).date() for f in fires]
    assert date(2024, 9, 13) in days  # a Friday the 13th
    assert all(d.day == 13 or d.weekday() == 4 for d in days)
    assert date(2024, 10, 13) in days and date(2024, 9, 20) in days
    friday_13th = stamp("2024-09-13T00:00:00+00:00")
    for schedule in schedules:
        fires_of_one = aws_fires(parse_aws_cron(schedule.expression), ZoneInfo("UTC"), start)
        assert friday_13th in [next(fires_of_one) for _ in range(3)]


def test_known_dst_difference_is_only_in_the_changing_hour() -> None:
    """`30 2 * * *` in Paris: croniter moves the missing 2:30 to 3:00 and fires twice in the
    repeated hour; AWS skips the one and fires once in the other. Nothing else differs."""
    timer = Timer(interval_seconds=60, cron="30 2 * * *", timezone="Europe/Paris")
    schedules = aws_schedules(timer)
    assert schedules is not None
    for start, only_croniter in (
        ("2024-03-25T00:00:00+00:00", ["2024-03-31T01:00:00+00:00"]),  # 3:00 CEST, in place of 2:30
        ("2024-10-21T00:00:00+00:00", ["2024-10-27T01:30:00+00:00"]),  # the second 2:30 (CET)
    ):
        local = cron_next_fires(timer, stamp(start), 12)
        aws = [t for t in aws_next_fires(schedules, stamp(start), 12) if t <= local[-1]]
        assert sorted(set(local) - set(aws)) == [stamp(t) for t in only_croniter]
        assert set(aws) <= set(local)


@pytest.mark.parametrize(
    "cron",
    [
        "0 0 L * *",
        "0 0 15W * *",
        "0 0 * * 5L",
        "0 0 * * 1#2",
        "0 0 ? * 1",
        "H * * * *",
        "@daily",
        "0 0 * * * *",
        "0 0 * *",
        "60 * * * *",
        "* 24 * * *",
        "0 0 0 * *",
        "0 0 * 13 *",
        "* * * * 8",
        "*/0 * * * *",
        "1-2-3 * * * *",
        "0 0 * * monday",
        "0 0 * jan-foo *",
        "0 0 1 mon *",  # a day name in the month field
        "0 0 * * jan",  # a month name in the day-of-week field
    ],
)
def test_non_standard_or_invalid_cron_is_refused(cron: str) -> None:
    with pytest.raises(ValueError):
        aws_schedules(Timer(interval_seconds=60, cron=cron, timezone="UTC"))


# --- intervals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expression"),
    [
        (60, "rate(1 minute)"),
        (120, "rate(2 minutes)"),
        (300, "rate(5 minutes)"),
        (5400, "rate(90 minutes)"),
        (3600, "rate(1 hour)"),
        (7200, "rate(2 hours)"),
        (86400, "rate(1 day)"),
        (86400 * 7, "rate(7 days)"),
        (366 * 86400, "rate(366 days)"),
        (90000, "rate(25 hours)"),
    ],
)
def test_whole_minute_intervals_are_rates(seconds: int, expression: str) -> None:
    assert aws_schedules(Timer.from_interval(seconds)) == [AwsSchedule("", expression, "UTC")]


@pytest.mark.parametrize("seconds", [1, 5, 30, 59, 61, 90, 150, 901, 3601])
def test_short_or_odd_intervals_have_no_schedule(seconds: int) -> None:
    assert aws_schedules(Timer.from_interval(seconds)) is None


# --- the evaluator itself ----------------------------------------------------------------------


def test_evaluator_reads_aws_syntax() -> None:
    """Pins the evaluator to AWS's documented meanings so the comparisons above mean something."""
    cron = parse_aws_cron("cron(0/15 8-17 ? JAN,MAR-MAY 2-6 *)")
    assert cron.minutes == {0, 15, 30, 45} and cron.hours == set(range(8, 18)) and cron.days is None
    assert cron.months == {1, 3, 4, 5} and cron.weekdays == {2, 3, 4, 5, 6}  # MON-FRI in AWS numbers
    assert cron.matches_day(date(2024, 3, 4)) and not cron.matches_day(date(2024, 3, 3))  # Mon yes, Sun no
    assert parse_aws_cron("cron(5/20 * 1 * ? *)").minutes == {5, 25, 45}
    for bad in ("cron(0 0 * * * *)", "cron(0 0 ? * ? *)", "cron(0 0 ? * */2 *)", "cron(0 0 ? * 8 *)", "cron(0 0 * *)"):
        with pytest.raises(AssertionError):
            parse_aws_cron(bad)
