"""Every published component tried, not only published (issue 36, item 3).

Lay out a seeded sample of a components tree (a folder of app folders, e.g. the public components
repository's `components/` copied to /tmp, never into this repository), publish it, then try each
published component against a running service over its REST API:

    .venv/bin/python bench/registry_try.py layout TREE OUT --sample 300 --seed 36
    .venv/bin/python bench/registry_try.py run --data-dir DIR [--publish OUT] --report report.jsonl
    .venv/bin/python bench/registry_try.py summary report.jsonl [--failures]

`run` starts `headwater serve` on DIR (or uses `--url` and `--key` of a running one whose data dir
is DIR), makes a user and a key, and for each published component (`--sample N` of them):

- `props`: the API's describe against a reference taken apart from the service: the bundle
  (`DIR/bundles/<code_hash>.cjs`) required by a plain Node in a bubblewrap sandbox with no
  network, its `props` resolved by this file's own small resolver; names, types, labels compared;
- `options`: each prop with `remoteOptions`, its app props given a stand-in connected account
  (fake credentials);
- `additional_props`: an action's `additionalProps()` (`POST /components/run`: a 422 naming
  additionalProps is its failure; whatever the run did after it is not judged);
- `deploy` (its `deploy` and `activate` hooks and `additionalProps()`), `run` (a timer source's
  run, an HTTP source given a sample request; its outcome read back from its runs), `delete`
  (`PUT active: false`, which runs `deactivate` and answers its failure, then `DELETE`): sources
  only.

Each failure is classed (`classify`): headwater, internet, native, package, credentials (the
stand-in account lacks a field), component, other. It prints the counts by step and class and
writes a JSON line per component and step. Method and one sample's counts: docs/performance.md,
"Every published component tried".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HEADWATER = [sys.executable, "-m", "headwater.cli"]
STEPS = ("publish", "props", "options", "additional_props", "deploy", "run", "delete")
CLASSES = ("ok", "headwater", "internet", "native", "package", "credentials", "component", "other")


# --- layout ---------------------------------------------------------------------------------

_RELATIVE = re.compile(r"""(?:\bfrom|\bimport|\brequire)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""")


def imported(path: Path) -> list[Path]:
    """The files `path` imports by a relative path (as the bundler would find them: the name, or
    with a code file's ending, or its folder's index)."""
    found = []
    for spec in _RELATIVE.findall(path.read_text(errors="replace")):
        base = (path.parent / spec).resolve()
        for candidate in (base, *(base.with_name(base.name + s) for s in (".mjs", ".js", ".ts", ".cjs", ".json")),
                          base / "index.mjs", base / "index.js"):
            if candidate.is_file():
                found.append(candidate)
                break
    return found


def layout(tree: Path, out: Path, sample: int, seed: int) -> list[str]:
    """Copies the app folders of a seeded sample of `sample` component files of `tree` into `out`,
    without their other component files but those a sampled file imports (its `test-event.mjs`, a
    sibling's common module, another app's), so that publishing `out` publishes the sample and
    what it needs. Returns the sampled files."""
    from headwater.services.registry import candidate_files

    files = [str(p.relative_to(tree)) for p in candidate_files(tree)]
    chosen = sorted(random.Random(seed).sample(files, min(sample, len(files))))
    needed: set[Path] = set()
    todo = [tree / f for f in chosen]
    while todo:
        path = todo.pop()
        if path in needed or not path.is_relative_to(tree):
            continue
        needed.add(path)
        todo += imported(path)
    apps = {p.relative_to(tree).parts[0] for p in needed}
    keep = {str(p.relative_to(tree)) for p in needed}
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for app in sorted(apps):
        shutil.copytree(tree / app, out / app, symlinks=True)
    for rel in files:
        if rel.split("/", 1)[0] in apps and rel not in keep:
            (out / rel).unlink()
    return chosen


# --- classifying a failure ------------------------------------------------------------------

# Checked in order: the first class whose pattern the message matches.
_CLASSES: list[tuple[str, re.Pattern[str]]] = [
    ("internet", re.compile(r"egress|ENOTFOUND|EAI_AGAIN|getaddrinfo|ECONNREFUSED|ECONNRESET|ETIMEDOUT|"
                            r"ENETUNREACH|EHOSTUNREACH|socket hang up|not allowed to reach|network|fetch failed|"
                            r"connection to|"
                            r"Request failed with status code|status code [45]\d\d|\b(401|403)\b.*(Unauthorized|"
                            r"Forbidden)|invalid[_ ](api[_ ]?key|token|auth)", re.I)),
    ("native", re.compile(r"native addon|\.node\b.*(addon|binary)|runs a program|spawn|ffmpeg|child_process", re.I)),
    # a file the component imports is not in the tree (the component's own bug, not npm's)
    ("component", re.compile(r"Could not resolve \"\.{1,2}/")),
    ("package", re.compile(r"npm error|E404|No matching version|Cannot find module|Could not resolve|"
                           r"is not in this registry|ETARGET", re.I)),
    # the stand-in account lacks a field its app needs (a region, a user name, a signer's URL)
    ("credentials", re.compile(r"Invalid URL|is missing|is required|must be specified|must provide|"
                               r"not provided|credential|Missing or invalid options", re.I)),
    ("component", re.compile(r"\b(TypeError|ReferenceError|SyntaxError|RangeError)\b|is not a function|"
                             r"Cannot read propert|is not defined|is not iterable|ConfigurationError", re.I)),
]
# Headwater's own answers that are never a component's doing: a 5xx, the runner dying, a refusal
# of the shape the service got wrong before (issue 36's false refusals).
_HEADWATER = re.compile(r"^5\d\d\b|The runner failed|runner (crashed|exited|ended)|out of memory|"
                        r"Internal Server Error|process\.binding|not a known prop shorthand|"
                        r"top-level await|unknown type|Access to this API has been restricted", re.I)


def classify(message: str) -> str:
    """A failure's class from its message (status first when it is an HTTP answer): `headwater`
    (the service's fault: fix it), `internet` (egress refused, DNS, an API that said no to fake
    credentials), `native` (an addon or a program), `package` (npm), `credentials` (the stand-in
    account lacks a field its app needs), `component` (its own code: a TypeError in its file),
    else `other`."""
    if _HEADWATER.search(message):
        return "headwater"
    for name, pattern in _CLASSES:
        if pattern.search(message):
            return name
    return "other"


# --- the reference: the bundle required by a plain Node, sandboxed ---------------------------

def reference(bundle: Path, runner_dir: Path, timeout_s: float, packages: Path | None = None) -> dict[str, Any]:
    """The component's props as its own module declares them (bench/registry_try_reference.cjs),
    read in a bubblewrap sandbox with no network that sees the bundle, the shared package store
    (read-only, its `hw-package:` ids resolved by the runner's packages.mjs), the runner's platform
    module and the system's libraries only."""
    from headwater.adapters.local.sandbox import _isolation, _system_mounts

    node = shutil.which("node") or "/usr/bin/node"
    script = Path(__file__).with_name("registry_try_reference.cjs")
    store = ["--ro-bind", str(packages), "/packages"] if packages and packages.is_dir() else ["--dir", "/packages"]
    command = ["bwrap", *_isolation(), *_system_mounts(), "--tmpfs", "/tmp",
               "--ro-bind", str(script), "/ref/reference.cjs",
               "--ro-bind", str(runner_dir / "platform"), "/runner/platform",
               "--ro-bind", str(runner_dir / "node_modules"), "/runner/node_modules",
               "--ro-bind", str(runner_dir / "src" / "packages.mjs"), "/runner/src/packages.mjs",
               "--ro-bind", str(bundle), f"/b/{bundle.name}",
               *store,
               "--clearenv", "--setenv", "HW_PACKAGES", "/packages",
               "--setenv", "HW_PACKAGES_MJS", "/runner/src/packages.mjs",
               "--setenv", "HW_PLATFORM", "/runner/platform/index.js", "--setenv", "PATH", "/usr/bin",
               "--setenv", "HOME", "/tmp",
               "--chdir", "/tmp", "--", node, "/ref/reference.cjs"]
    try:
        proc = subprocess.run(command, input=f"/b/{bundle.name}\n", capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the reference did not load in {timeout_s:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"file"')]
    if not lines:
        return {"ok": False, "error": f"the reference printed nothing: {proc.stderr[-300:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def compare_props(described: list[dict[str, Any]], ref: list[dict[str, Any]]) -> list[str]:
    """What differs between the API's configurable_props and the reference: names (in order),
    types, labels."""
    diffs = []
    names = [p["name"] for p in described]
    ref_names = [p["name"] for p in ref]
    if names != ref_names:
        diffs.append(f"names {names} != {ref_names}")
    by_name = {p["name"]: p for p in described}
    for r in ref:
        d = by_name.get(r["name"])
        if d is None:
            continue
        if d.get("type") != r.get("type"):
            diffs.append(f"{r['name']}: type {d.get('type')!r} != {r.get('type')!r}")
        if d.get("label") != r.get("label"):
            diffs.append(f"{r['name']}: label {d.get('label')!r} != {r.get('label')!r}")
    return diffs


# --- trying components over the API ----------------------------------------------------------

@dataclass
class Outcome:
    key: str
    step: str
    cls: str  # one of CLASSES
    detail: str = ""
    seconds: float = 0.0


class Client:
    def __init__(self, url: str, key: str, timeout_s: float) -> None:
        import httpx

        self.http = httpx.Client(base_url=url.rstrip("/") + "/v1", timeout=timeout_s,
                                 headers={"Authorization": f"Bearer {key}"})
        self.base = url.rstrip("/")

    def call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        import httpx

        try:
            r = self.http.request(method, path, **kw)
        except httpx.TimeoutException:
            return 0, {"message": "timeout: the step did not finish in time"}
        try:
            body = r.json() if r.content else None
        except ValueError:
            body = {"message": r.text[:500]}
        return r.status_code, body

    def registry(self) -> list[dict[str, Any]]:
        found, after = [], None
        while True:
            params: dict[str, Any] = {"limit": 100}
            if after:
                params["after"] = after
            status, body = self.call("GET", "/components/registry", params=params)
            if status != 200:
                raise SystemExit(f"GET /components/registry: {status} {body}")
            found += body["data"]
            after = body["page_info"].get("end_cursor")
            if not body["data"] or len(found) >= body["page_info"].get("total_count", 0) or not after:
                return found


def message_of(status: int, body: Any) -> str:
    text = (body.get("message") or body.get("error")) if isinstance(body, dict) else None
    details = body.get("details") if isinstance(body, dict) else None
    return f"{status} {text or body}" + (f" {json.dumps(details)[:600]}" if details else "")


# Sample values for props a deploy needs: a type's plain value, the stand-in account for apps.
_SAMPLE: dict[str, Any] = {"string": "sample", "integer": 1, "boolean": False, "object": {}, "any": "sample",
                           "string[]": ["sample"], "integer[]": [1], "boolean[]": [False], "object[]": [{}]}
SAMPLE_REQUEST = {"hello": "world", "id": "1", "event": "sample", "data": {"id": "1"}}


class Trier:
    """The steps of one component, each in its own timeout."""

    def __init__(self, client: Client, data_dir: Path, runner_dir: Path, timeout_s: float) -> None:
        self.client = client
        self.data_dir = data_dir
        self.runner_dir = runner_dir
        self.timeout_s = timeout_s
        self.accounts: dict[str, str] = {}

    def account(self, app: str) -> str:
        """A stand-in connected account of `app` with fake credentials (what $auth fields an app reads
        is not known: the common ones)."""
        if app not in self.accounts:
            creds = {"api_key": "fake-key-0000", "oauth_access_token": "fake-token-0000", "api_token": "fake-0000",
                     "token": "fake-0000", "domain": "example.invalid", "subdomain": "example"}
            status, body = self.client.call("POST", "/accounts", json={"app": app, "name": f"stand-in {app}",
                                                                        "credentials": creds})
            if status != 200:
                raise RuntimeError(f"POST /accounts for {app}: {message_of(status, body)}")
            self.accounts[app] = body["data"]["id"]
        return self.accounts[app]

    def configured(self, props: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p in props:
            t = p.get("type", "")
            if t == "app":
                out[p["name"]] = {"authProvisionId": self.account(p["app"])}
            elif t == "$.interface.timer":
                out[p["name"]] = p.get("default") or {"intervalSeconds": 3600}
            elif t in ("$.interface.http", "$.service.db") or p.get("optional") or "default" in p:
                continue
            elif isinstance(p.get("options"), list) and p["options"]:
                first = p["options"][0]
                value = first.get("value") if isinstance(first, dict) else first
                out[p["name"]] = [value] if t.endswith("[]") else value
            elif "url" in p["name"].lower() and t == "string":
                out[p["name"]] = "https://example.invalid/sample"
            else:
                out[p["name"]] = _SAMPLE.get(t, "sample")
        return out

    def timed(self, key: str, step: str, fn: Any) -> Outcome:
        started = time.monotonic()
        try:
            cls, detail = fn()
        except Exception as e:  # a step's own failure (an account refused, a bad answer): reported, not fatal
            cls, detail = classify(str(e)), f"{type(e).__name__}: {e}"
        return Outcome(key, step, cls, detail[:1000], round(time.monotonic() - started, 2))

    def failed(self, status: int, body: Any) -> tuple[str, str]:
        message = message_of(status, body)
        return classify(message), message

    def props_step(self, c: dict[str, Any]) -> tuple[str, str]:
        bundle = self.data_dir / "bundles" / f"{c['code_hash']}.cjs"
        if not bundle.exists():
            return "headwater", f"no bundle at {bundle}"
        ref = reference(bundle, self.runner_dir, self.timeout_s, self.data_dir / "packages")
        if not ref.get("ok"):
            return "other", f"the reference did not load: {ref.get('error')}"
        c["_ref"] = ref
        diffs = compare_props(c["configurable_props"], ref["props"])
        return ("headwater", "; ".join(diffs)) if diffs else ("ok", "")

    def options_step(self, c: dict[str, Any], prop: dict[str, Any]) -> tuple[str, str]:
        configured = {p["name"]: {"authProvisionId": self.account(p["app"])}
                      for p in c["configurable_props"] if p.get("type") == "app"}
        status, body = self.client.call("POST", f"/components/registry:{c['key']}/props/{prop['name']}/options",
                                        json={"configured_props": configured})
        if status == 200:
            return "ok", ""
        return self.failed(status, body)

    def additional_props_step(self, c: dict[str, Any]) -> tuple[str, str]:
        status, body = self.client.call("POST", "/components/run", json={
            "component_code": c["code"], "configured_props": self.configured(c["configurable_props"])})
        if status == 200:
            return "ok", ""
        message = message_of(status, body)
        if status == 422 and "additionalProps" not in message:
            return "ok", f"additionalProps answered; the run refused: {message[:200]}"
        return classify(message), message

    def source_steps(self, c: dict[str, Any]) -> list[Outcome]:
        key = c["key"]
        out: list[Outcome] = []
        holder: dict[str, Any] = {}

        def deploy() -> tuple[str, str]:
            status, body = self.client.call("POST", "/sources/", json={
                "component_id": c["id"], "name": f"try {key}"[:60],
                "configured_props": self.configured(c["configurable_props"])})
            if status != 200:
                return self.failed(status, body)
            holder["source"] = body["data"]
            return "ok", ""

        out.append(self.timed(key, "deploy", deploy))
        source = holder.get("source")
        if source is None:
            return out
        out.append(self.timed(key, "run", lambda: self.run_once(c, source)))

        def delete() -> tuple[str, str]:
            status, body = self.client.call("PUT", f"/sources/{source['id']}", json={"active": False})
            verdict = ("ok", "") if status == 200 else self.failed(status, body)
            status, body = self.client.call("DELETE", f"/sources/{source['id']}")
            if status != 204:
                return self.failed(status, body)
            return verdict

        out.append(self.timed(key, "delete", delete))
        return out

    def run_once(self, c: dict[str, Any], source: dict[str, Any]) -> tuple[str, str]:
        """A timer source's manual run, an HTTP source's sample request; its record read back."""
        import httpx

        sid = source["id"]
        before = self.newest_run(sid)
        endpoints = [v["endpoint_url"] for v in (source.get("configured_props") or {}).values()
                     if isinstance(v, dict) and "endpoint_url" in v]
        if endpoints:
            try:
                httpx.post(endpoints[0], json=SAMPLE_REQUEST, timeout=self.timeout_s)
            except httpx.TimeoutException:
                return "other", "timeout: the HTTP source did not answer in time"
        else:
            status, body = self.client.call("POST", f"/sources/{sid}/run")
            if status != 202:
                return self.failed(status, body)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            run = self.newest_run(sid)
            if run is not None and run["id"] != (before or {}).get("id") and run.get("kind") != "hook":
                if run.get("outcome") == "success":
                    return "ok", ""
                error = run.get("error") or {}
                message = f"{run.get('outcome')} {error.get('code')}: {error.get('message')}"
                if error.get("code") == "TIMEOUT":
                    return "other", message
                return classify(message), message
            time.sleep(0.5)
        return "other", "timeout: no run on record in time"

    def newest_run(self, sid: str) -> dict[str, Any] | None:
        status, body = self.client.call("GET", f"/sources/{sid}/runs", params={"limit": 5})
        if status != 200:
            return None
        runs = [r for r in body["data"] if r.get("kind") != "hook"]
        return runs[0] if runs else None

    def try_one(self, c: dict[str, Any]) -> list[Outcome]:
        key = c["key"]
        out = [self.timed(key, "props", lambda: self.props_step(c))]
        for prop in c["configurable_props"]:
            if prop.get("remoteOptions"):
                out.append(self.timed(key, "options", lambda prop=prop: self.options_step(c, prop)))
        ref = c.get("_ref") or {}
        if ref.get("additional_props") and c.get("type") == "action":
            out.append(self.timed(key, "additional_props", lambda: self.additional_props_step(c)))
        if c.get("type", "source") == "source":
            out += self.source_steps(c)
        return out


# --- the service ------------------------------------------------------------------------------

def start_service(data_dir: Path, port: int, runner_dir: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """`headwater serve` on `data_dir`, and a paid user's key (no daily quota stops the run)."""
    import httpx

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")},
           "HEADWATER_DATA_DIR": str(data_dir), "HEADWATER_PORT": str(port), "HEADWATER_HOST": "127.0.0.1",
           "HEADWATER_INGEST_RATE": "0", "HEADWATER_RUNNER_DIR": str(runner_dir)}
    made = subprocess.run([*HEADWATER, "users", "create", "--username", f"try{int(time.time())}",
                           "--email", "try@example.invalid", "--tier", "paid", "--data-dir", str(data_dir), "--json"],
                          env=env, capture_output=True, text=True, check=True)
    key = json.loads(made.stdout)["api_key"]
    log = open(data_dir / "registry-try-serve.log", "ab")  # noqa: SIM115 (the server's, for its life)
    server = subprocess.Popen([*HEADWATER, "serve"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return server, url, key
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise SystemExit(f"the service did not start (see {data_dir / 'registry-try-serve.log'})")
        time.sleep(0.5)


def summary(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    table: dict[str, Counter[str]] = {step: Counter() for step in STEPS}
    for o in outcomes:
        table[o.step][o.cls] += 1
    return {step: dict(sorted(c.items())) for step, c in table.items()}


def publish_outcomes(results: list[dict[str, Any]]) -> list[Outcome]:
    """`headwater registry publish --json`'s results as the `publish` step (helpers left out)."""
    return [Outcome(r["file"], "publish", "ok" if r["status"] in ("published", "unchanged")
                    else classify(r.get("reason") or ""), r.get("reason") or "")
            for r in results if r["status"] not in ("helper", "skipped")]


def summarize(args: argparse.Namespace) -> None:
    """Counts by step and class of a report written before, each failure classed again by this
    `classify` (a class added later applies to old reports too)."""
    outcomes = [Outcome(**json.loads(line)) for line in args.report.read_text().splitlines() if line]
    for o in outcomes:
        if o.cls != "ok" and o.detail and not o.detail.startswith(("the reference", "no bundle")):
            o.cls = classify(o.detail) if not o.detail.startswith("timeout") else "other"
    if args.publish_json:
        outcomes += publish_outcomes(json.loads(args.publish_json.read_text())["results"])
    print(json.dumps({"components": len({o.key for o in outcomes if o.step != "publish"}),
                      "by_step_and_class": summary(outcomes)}, indent=1))
    if args.failures:
        for o in outcomes:
            if o.cls not in ("ok", *args.failures_except):
                print(f"{o.step:16} {o.cls:11} {o.key}: {o.detail[:160]}")


def run(args: argparse.Namespace) -> None:
    data_dir = args.data_dir.resolve()
    if args.publish:
        proc = subprocess.run([*HEADWATER, "registry", "publish", str(args.publish), "--data-dir", str(data_dir),
                               "--json"], capture_output=True, text=True,
                              env={**os.environ, "HEADWATER_RUNNER_DIR": str(args.runner_dir.resolve())})
        (data_dir / "registry-try-publish.json").write_text(proc.stdout)
        published = publish_outcomes(json.loads(proc.stdout)["results"]) if proc.stdout.strip() else []
    else:
        published = []
    server = None
    if args.url:
        url, key = args.url, args.key
    else:
        server, url, key = start_service(data_dir, args.port, args.runner_dir.resolve())
    try:
        client = Client(url, key, args.timeout)
        components = [c for c in client.registry() if c.get("key")]
        if args.only:
            components = [c for c in components if re.search(args.only, c["key"])]
        if args.sample and args.sample < len(components):
            components = random.Random(args.seed).sample(components, args.sample)
        trier = Trier(client, data_dir, args.runner_dir.resolve(), args.timeout)
        outcomes: list[Outcome] = list(published)
        with open(args.report, "w") as report, ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            report.writelines(json.dumps(asdict(o)) + "\n" for o in published)
            for done in pool.map(lambda c: trier.try_one(dict(c)), components):
                for o in done:
                    report.write(json.dumps(asdict(o)) + "\n")
                    outcomes.append(o)
                report.flush()
                if not args.quiet:
                    print(" ".join(f"{o.step}:{o.cls}" for o in done), done[0].key if done else "", flush=True)
        table = summary(outcomes)
        print(json.dumps({"components": len(components), "by_step_and_class": table}, indent=1))
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    lay = sub.add_parser("layout", help="lay out a seeded sample of a components tree")
    lay.add_argument("tree", type=Path)
    lay.add_argument("out", type=Path)
    lay.add_argument("--sample", type=int, default=300)
    lay.add_argument("--seed", type=int, default=36)
    tr = sub.add_parser("run", help="try every published component of a data dir's service")
    tr.add_argument("--data-dir", type=Path, required=True)
    tr.add_argument("--publish", type=Path, help="publish this folder into the data dir first")
    tr.add_argument("--url", help="a running service on --data-dir (else one is started)")
    tr.add_argument("--key", help="an API key of --url's (a paid user's)")
    tr.add_argument("--port", type=int, default=18797)
    tr.add_argument("--runner-dir", type=Path, default=ROOT / "layers" / "runner")
    tr.add_argument("--report", type=Path, default=Path("registry-try.jsonl"))
    tr.add_argument("--sample", type=int, default=0, help="try a seeded sample of N published components")
    tr.add_argument("--seed", type=int, default=36)
    tr.add_argument("--only", help="keys matching this regular expression")
    tr.add_argument("--concurrency", type=int, default=2)
    tr.add_argument("--timeout", type=float, default=60.0, help="seconds a step may take")
    tr.add_argument("--quiet", action="store_true")
    sm = sub.add_parser("summary", help="counts by step and class of a report, classed again")
    sm.add_argument("report", type=Path)
    sm.add_argument("--publish-json", type=Path, help="`headwater registry publish --json`'s output, as a step")
    sm.add_argument("--failures", action="store_true", help="list the failures too")
    sm.add_argument("--failures-except", nargs="*", default=["internet"])
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    elif args.command == "summary":
        summarize(args)
    elif args.command == "layout":
        chosen = layout(args.tree.resolve(), args.out, args.sample, args.seed)
        print(json.dumps({"components": len(chosen), "apps": len({f.split("/", 1)[0] for f in chosen})}))


if __name__ == "__main__":
    main()
