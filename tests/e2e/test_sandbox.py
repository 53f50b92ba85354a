"""User code is untrusted: it cannot read the service's files or environment, nor start processes
(the escape suite in tests/e2e/security/ tries harder)."""

from __future__ import annotations

import time

import httpx

from tests.conftest import Server

PROBE = """import fs from "node:fs";
import { execSync } from "node:child_process";
export default {
  name: "Probe",
  version: "1.0.0",
  props: { http: "$.interface.http" },
  async run(event) {
    const attempt = (fn) => { try { return { ok: true, value: String(fn()).slice(0, 100) } }
                              catch (e) { return { ok: false, code: e.code || e.name } } };
    this.$emit({
      env: process.env,
      database: attempt(() => fs.readFileSync(event.body.database, "utf8")),
      secretKey: attempt(() => fs.readFileSync(event.body.secretKey, "utf8")),
      passwd: attempt(() => fs.readFileSync("/etc/passwd", "utf8")),
      listing: attempt(() => fs.readdirSync("/")),
      write: attempt(() => fs.writeFileSync(event.body.database + ".x", "x")),
      // built at run time: a literal command is refused at deploy (NEEDS_EXECUTABLE), this tries the sandbox
      spawn: attempt(() => execSync(["i", "d"].join(""))),
    });
  },
};
"""


def test_component_cannot_reach_service_files_env_or_processes(server: Server, api: httpx.Client) -> None:
    source = api.post("/sources", json={"component_code": PROBE}).json()["data"]
    url = source["configured_props"]["http"]["endpoint_url"]
    body = {"database": str(server.data_dir / "headwater.db"), "secretKey": str(server.data_dir / "secret.key")}
    assert httpx.post(url, json=body).status_code == 200
    deadline = time.monotonic() + 60
    while not (items := api.get(f"/sources/{source['id']}/event_summaries").json()["data"]):
        assert time.monotonic() < deadline, "the probe never ran"
        time.sleep(0.05)
    seen = items[0]["event"]
    assert seen["env"] == {"PD_COMPONENT": source["id"]}
    for attempt in ("database", "secretKey", "passwd", "listing", "write", "spawn"):
        # Denied by Node's permission model, or absent: the OS sandbox mounts none of the service's files.
        assert seen[attempt]["ok"] is False, (attempt, seen[attempt])
        assert seen[attempt]["code"] in {"ERR_ACCESS_DENIED", "ENOENT"}, (attempt, seen[attempt])
