"""Real registry components run here (issue 12): npm versions from the app folder's package.json,
Node's CommonJS interop, require() in a sibling file, the platform's sqlProxy, http_request's
axios response, registry ids deployed from another account, no-auth apps, helper modules.

One multi-file app folder (tests/components/registry_app) is published once into the session's
service; its few npm installs (one small package) share that service's package store and cache.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from headwater.adapters.local.bundler import LocalBundler
from headwater.domain.errors import Invalid
from headwater.settings import Settings
from tests.conftest import COMPONENTS, HEADWATER, Server, client_for, new_user
from tests.e2e.test_sources_api import wait_events

APP = COMPONENTS / "registry_app"
SLOW = httpx.Timeout(180.0)


@pytest.fixture(scope="module")
def published(server: Server) -> dict:
    proc = subprocess.run([*HEADWATER, "registry", "publish", str(APP), "--data-dir", str(server.data_dir), "--json",
                           "--keep-npm-store"],  # test_store_keeps_one_tree_per_package_version looks into it
                          capture_output=True, text=True, env=server.env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture
def other(server: Server) -> Iterator[httpx.Client]:
    """A second account, not the one that published."""
    with client_for(server, new_user(server).api_key) as client:
        client.timeout = SLOW
        yield client


def ids(published: dict) -> dict[str, str]:
    return {r["key"]: r["id"] for r in published["results"] if r["status"] == "published"}


def test_publish_counts_helpers_apart_and_exits_0(published: dict) -> None:
    status = {r["file"]: r["status"] for r in published["results"]}
    assert status == {
        "sources/interop/interop.mjs": "published",
        "sources/pinned/pinned.mjs": "published",
        "sources/request-prop/request-prop.mjs": "published",
        "test-event.mjs": "helper",
        "sources/events.mjs": "helper",
    }
    assert (published["published"], published["skipped"], published["failed"], published["helpers"]) == (3, 0, 0, 2)
    assert published["failure_causes"] == {}


def test_versions_come_from_the_import_then_the_package_json(published: dict, other: httpx.Client) -> None:
    interop = other.get(f"/components/{ids(published)['hwtest-registry-interop']}").json()["data"]
    # the app folder asks ^6.0.0; the latest release is a later major
    assert interop["packages"]["universal-user-agent"].startswith("6.")
    assert 'from "universal-user-agent@^6.0.0"' in interop["code"]
    pinned = other.get(f"/components/{ids(published)['hwtest-registry-pinned']}").json()["data"]
    assert pinned["packages"] == {"universal-user-agent": "6.0.0"}


def test_registry_id_from_another_account_with_interop_require_sqlproxy_and_no_auth_app(
        published: dict, other: httpx.Client) -> None:
    component_id = ids(published)["hwtest-registry-interop"]
    described = other.get(f"/components/{component_id}").json()["data"]
    app_prop = next(p for p in described["configurable_props"] if p["name"] == "app")
    assert app_prop["auth_type"] == "none"
    r = other.post("/sources", json={"component_id": component_id})  # the app prop left out
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    assert other.post(f"/sources/{source['id']}/run").status_code == 202
    event = wait_events(other, source["id"], 1, timeout=60)[0]["event"]
    assert event == {
        "defaultImport": "object",  # module.exports, as Node's ESM gives it, though it sets __esModule
        "getUserAgent": "function",
        "fromRequire": "string",  # require() in common/agent.js was bundled
        "rows": [{"sql": "SELECT ?", "values": [1]}],  # sqlProxy's executeQueryWithProxy -> executeQuery
    }


def test_an_app_that_reads_auth_still_needs_a_value(other: httpx.Client) -> None:
    code = """export default { name: "needs auth", version: "1", props: {
      app: { type: "app", app: "keyed", methods: { key() { return this.$auth.api_key } } } }, run() {} }"""
    r = other.post("/sources", json={"component_code": code})
    assert r.status_code == 422 and "app" in r.json()["details"], r.text


def test_http_request_execute_resolves_to_the_axios_response(server: Server, published: dict,
                                                             other: httpx.Client) -> None:
    r = other.post("/sources", json={"component_id": ids(published)["hwtest-registry-request-prop"],
                                     "configured_props": {"req": {"url": f"{server.base_url}/healthz"}}})
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    assert other.post(f"/sources/{source['id']}/run").status_code == 202
    event = wait_events(other, source["id"], 1, timeout=60)[0]["event"]
    assert event["status"] == 200 and event["contentType"].startswith("application/json")
    assert isinstance(event["data"], dict)


def test_a_package_with_a_js_fallback_for_its_addon_runs_without_it(other: httpx.Client) -> None:
    """bufferutil loads its addon with node-gyp-build inside a try/catch and falls back to plain
    JavaScript: the loader is left out and the fallback is what the component gets (the refusal
    of an addon loaded on the path is tests/e2e/test_native_packages.py)."""
    code = """import bufferutil from "bufferutil@4.0.9";
    export default { name: "native " + typeof bufferutil.mask, version: "1", props: {}, run() {} }"""
    r = other.post("/components", json={"component_code": code})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["name"] == "native function"


def test_a_lock_installs_the_recorded_version_again(server: Server) -> None:
    """A component's recorded versions are what a bundle made again installs (a redeploy on a
    machine without the bundle), not what the range would resolve to today."""
    settings = dataclasses.replace(Settings(), data_dir=server.data_dir)  # the session's package store
    bundler = LocalBundler(settings)
    code = ('import uua from "universal-user-agent@^6.0.0";\n'
            'export default { name: "lock", version: "1", run() { return uua.getUserAgent() } }')
    fresh = bundler.bundle(code + "\n// fresh\n")
    locked = bundler.bundle(code + "\n// locked\n", {"universal-user-agent": "6.0.0"})
    assert fresh.packages["universal-user-agent"] != "6.0.0"  # ^6.0.0 resolves to a later 6.x today
    assert locked.packages == {"universal-user-agent": "6.0.0"}
    assert "universal-user-agent@6.0.0" in locked.code
    with pytest.raises(Invalid, match="no version of npm package universal-user-agent"):
        bundler.bundle('import u from "universal-user-agent@^99.0.0"; export default {name: "x", version: "1"}')


def test_store_keeps_one_tree_per_package_version(server: Server, published: dict) -> None:
    store = Path(server.data_dir) / "npm-store"
    trees = sorted(p.name for p in store.iterdir() if not p.name.startswith("."))
    assert [t for t in trees if t.startswith("universal-user-agent@6.0.0")] == ["universal-user-agent@6.0.0"]
    assert not (Path(server.data_dir) / "npm").exists()  # no per-component npm work dirs any more


# What components of the public registry import from @pipedream/platform (grepped from real app
# folders: ConfigurationError, DEFAULT_POLLING_SOURCE_TIMER_INTERVAL, axios, getFileStream,
# getFileStreamAndMetadata, sqlProxy, sqlProp) and the rest of the package's documented exports.
PLATFORM_NAMES = ["axios", "ConfigurationError", "DEFAULT_POLLING_SOURCE_TIMER_INTERVAL", "getFileStream",
                  "getFileStreamAndMetadata", "sqlProxy", "sqlProp", "transformConfigForOauth", "cloneSafe",
                  "jsonStringifySafe", "PD_OFFICIAL_GMAIL_OAUTH_CLIENT_ID", "HTTP_METHODS", "END_NEEDLE", "$end"]


def test_every_platform_name_real_components_import_is_there(other: httpx.Client) -> None:
    names = ", ".join(PLATFORM_NAMES)
    code = f"""import platform, {{ {names} }} from "@pipedream/platform";
    const kinds = {{ {", ".join(f'"{n}": typeof {n}' for n in PLATFORM_NAMES)} }};
    export default {{ key: "hwtest-platform-names", name: "platform " + JSON.stringify(kinds)
      + Object.keys(platform).length, version: "1", props: {{}}, run() {{}} }}"""
    r = other.post("/components", json={"component_code": code})
    assert r.status_code == 200, r.text
    name = r.json()["data"]["name"]
    kinds = json.loads(name[len("platform "):name.rindex("}") + 1])
    assert all(kinds[n] != "undefined" for n in PLATFORM_NAMES if n != "PD_OFFICIAL_GMAIL_OAUTH_CLIENT_ID"), kinds
    assert kinds["sqlProxy"] == "object" and kinds["axios"] == "function"


def test_package_requires_of_files_next_to_them_become_static() -> None:
    """pg-format does `require(__dirname + '/reserved.js')`: in a bundle there is no such file."""
    script = """import { staticDirnameRequires, realRequires } from './src/rewrites.mjs'
    console.log(JSON.stringify([
      staticDirnameRequires("var m = require(__dirname + '/reserved.js');"),
      staticDirnameRequires('const x = require(path.join(__dirname, "lib/x.json"))'),
      staticDirnameRequires("require(__dirname + someVariable)"),
      realRequires('var a = __require("axios@^1.6.0"); var s = "__require"'),
    ]))"""
    settings = Settings()
    out = subprocess.run([str(settings.node), "--input-type=module", "-e", script], cwd=settings.runner_dir,
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out) == [
        "var m = require('./reserved.js');",
        'const x = require("./lib/x.json")',
        "require(__dirname + someVariable)",
        'var a = require("axios@^1.6.0"); var s = "__require"',
    ]
