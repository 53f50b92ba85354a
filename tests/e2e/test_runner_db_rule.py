"""The runner hands `this.db` on between the runs of a batch by the service's own rule: `handOn`
(layers/runner/src/db.mjs) gives what `merge_db` (domain/runs.py) stores, whatever the writes."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from headwater.domain.runs import merge_db
from headwater.settings import Settings

CASES: list[tuple[Any, dict[str, Any]]] = [
    ({}, {}),
    ({"a": 1}, {"b": 2}),
    ({"a": 1, "b": 2}, {"a": None}),
    ({"a": 1}, {"a": {"x": [1, None]}, "c": None}),
    ({"a": 1, "z": None}, {}),  # a null the db was given goes too, as in merge_db
    ({"a": 1}, {"a": None, "b": None, "c": 0, "d": "", "e": False}),
    (None, {"a": 1}),  # no db given: an empty one
]

SCRIPT = """
const { handOn, serviceDb } = await import(process.argv[1])
const cases = JSON.parse(process.argv[2])
const posted = []
const { prop, writes } = serviceDb({ a: 1 }, (key, value) => posted.push([key, value]))
prop.set('a', undefined); prop.set('b', { n: 1, f: () => 1 }); prop.set(3, 'three')
const seen = [prop.get('a'), prop.get('b'), prop.get('3'), prop.get('missing') === undefined]
console.log(JSON.stringify({ merged: cases.map(([db, w]) => handOn(db, w)), posted, writes, seen }))
"""


def test_hand_on_is_the_services_merge_and_the_db_prop_reports_each_write() -> None:
    settings = Settings()
    db_module = settings.runner_dir / "src" / "db.mjs"
    out = subprocess.run([str(settings.node), "--input-type=module", "-e", SCRIPT, str(db_module), json.dumps(CASES)],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    got = json.loads(out)
    assert got["merged"] == [merge_db(db or {}, writes) for db, writes in CASES]
    assert got["posted"] == [["a", None], ["b", {"n": 1}], ["3", "three"]]
    assert got["writes"] == {"a": None, "b": {"n": 1}, "3": "three"}
    assert got["seen"] == [None, {"n": 1}, "three", True]
