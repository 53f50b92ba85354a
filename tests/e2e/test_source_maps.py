"""Error stacks point at the user's file and line, not the bundle's (docs/runner-protocol.md,
"Stacks"): ESM, CommonJS, TypeScript and relative imports, in the run's error and in a logged
error, through the real bundler and a real runner process (no HTTP server: the pool directly)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.domain.runs import RunResult
from headwater.ports import Instance
from headwater.settings import REPO_ROOT, Settings
from tests.conftest import COMPONENTS
from tests.e2e.test_runs import wait_events

MAPS = COMPONENTS / "maps"
Runtime = tuple[LocalBundler, NodeRunnerPool, Path]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalBundler, NodeRunnerPool, Path]]:
    data_dir = tmp_path_factory.mktemp("maps")
    settings = Settings(data_dir=data_dir, runner_processes=1)
    pool = NodeRunnerPool(settings)
    try:
        yield LocalBundler(settings), pool, data_dir
    finally:
        pool.close()


def run_once(runtime: Runtime, code: str, file_name: str | None = None) -> RunResult:
    bundler, pool, _ = runtime
    instance = Instance(id="dc_maps", props={}, account="a", db={}, file_name=file_name)
    return pool.run_many(bundler.bundle(code), instance, [{}], 10_000)[0]


def frames(stack: str) -> list[str]:
    return [line.strip() for line in stack.splitlines() if line.strip().startswith("at ")]


def assert_nothing_of_the_host(text: str, data_dir: Path) -> None:
    for leak in ("worker.mjs", "layers/runner", "file://", "node:internal", "npm-store", str(REPO_ROOT),
                 str(data_dir), "/tmp/"):
        assert leak not in text, (leak, text)


def test_an_esm_components_stack_and_logged_error_name_its_own_lines(runtime: Runtime) -> None:
    result = run_once(runtime, (MAPS / "esm_throw.mjs").read_text())
    assert result.error is not None
    stack = result.error["stack"]
    assert stack.startswith("Error: thrown at line 6"), stack
    assert frames(stack)[:3] == ["at deeper (component.js:5:9)", "at deeper (component.js:4:21)",
                                 "at Object.run (component.js:13:7)"], stack
    logged = "\n".join(entry["message"] for entry in result.logs)
    assert "at deeper (component.js:5:9)" in logged, logged
    for text in (stack, logged):
        assert_nothing_of_the_host(text, runtime[2])


def test_a_commonjs_components_stack_names_its_own_lines(runtime: Runtime) -> None:
    result = run_once(runtime, (MAPS / "cjs_throw.js").read_text())
    assert result.error is not None
    assert frames(result.error["stack"])[:2] == ["at Object.fail (component.js:5:11)",
                                                 "at Object.run (component.js:13:13)"], result.error["stack"]


def test_a_typescript_components_stack_names_the_lines_of_its_typescript(runtime: Runtime) -> None:
    result = run_once(runtime, (MAPS / "ts_throw.ts").read_text())
    assert result.error is not None
    assert result.error["stack"].startswith("RangeError: too big: box")
    assert frames(result.error["stack"])[:2] == ["at check (component.ts:8:29)",
                                                 "at Object.run (component.ts:17:5)"], result.error["stack"]


def test_relative_imports_keep_their_files_names_through_the_source_pass(runtime: Runtime) -> None:
    """A workflow step or a registry file is inlined with its neighbours first (`source_of`):
    the frames name each file, relative to the entry's folder."""
    code = runtime[0].source_of(str(MAPS / "relative_entry.mjs"))
    result = run_once(runtime, code)
    assert result.error is not None
    assert frames(result.error["stack"])[:2] == ["at explode (lib/explode.mjs:4:9)",
                                                 "at Object.run (relative_entry.mjs:8:5)"], result.error["stack"]
    assert_nothing_of_the_host(result.error["stack"], runtime[2])


def write_thrower(store: Path) -> None:
    """A local npm package (a complete store tree: no registry asked) whose function throws,
    after 120 other statements, so its frame is far below any line of a user's short file."""
    tree = store / "hwtest-maps-thrower@1.0.0"
    package = tree / "node_modules" / "hwtest-maps-thrower"
    package.mkdir(parents=True, exist_ok=True)
    (package / "package.json").write_text('{"name": "hwtest-maps-thrower", "version": "1.0.0", "main": "index.js"}')
    throws = "exports.explode = function explode() { throw new Error('from the package') }\n"
    (package / "index.js").write_text("".join(f"exports.f{i} = () => {i}\n" for i in range(120)) + throws)
    (tree / ".complete").write_text("")


# The thrower's bundle in the shared package store, as its frames name it (worker.mjs).
STORE_FILE = re.escape("node_modules/hwtest-maps-thrower@1.0.0/r_.cjs")


def test_an_npm_packages_frames_stay_bundle_positions_never_lines_of_the_users_file(runtime: Runtime) -> None:
    """Packages' code has no segments in the map (its frames stay positions in its bundle: the shared
    store's, `node_modules/<name>@<version>/r_.cjs:<line>`, or `component.js:<line>` when inlined):
    a frame of a package is never passed off as a line of the user's seven; the platform module
    (the runner's own, required at run time) is named as the package the component imported."""
    write_thrower(runtime[2] / "npm-store")
    code = """import { explode } from "hwtest-maps-thrower@1.0.0";
export default {
  name: "Maps package", version: "0.1.0",
  async run() {
    explode();
  },
};"""
    result = run_once(runtime, code)
    assert result.error is not None and result.error["message"] == "from the package", result.error
    stack = result.error["stack"]
    assert_nothing_of_the_host(stack, runtime[2])
    package, own = frames(stack)
    assert own == "at Object.run (component.js:5:5)", stack
    line = re.fullmatch(rf"at explode\d* \((?:component\.js|{STORE_FILE}):(\d+):\d+\)", package)
    assert line and int(line.group(1)) > 100, stack

    code = """import { axios } from "@pipedream/platform";
export default {
  name: "Maps platform", version: "0.1.0",
  async run() {
    await axios(this, { url: "not a url at all" });
  },
};"""
    result = run_once(runtime, code)
    assert result.error is not None
    stack = result.error["stack"]
    assert_nothing_of_the_host(stack, runtime[2])
    *_, platform, own = frames(stack)
    assert own == "at async Object.run (component.js:5:5)", stack
    assert re.fullmatch(r"at async callAxios \(node_modules/@pipedream/platform/index\.js:\d+:\d+\)", platform), stack


def test_code_sent_with_its_file_name_has_its_frames_named_by_it(runtime: Runtime) -> None:
    """The same bundle (cached by code) under the name a deploy gave: the user's frames, logged
    ones too, name the file; a package's frames stay bundle positions under `component.js`; the
    instance's worker, warm from a run without the name, is started again with it."""
    write_thrower(runtime[2] / "npm-store")
    code = (MAPS / "esm_throw.mjs").read_text().replace("export default", 'import { explode } from '
                                                         '"hwtest-maps-thrower@1.0.0";\nexport default', 1)
    assert frames(run_once(runtime, code).error["stack"])[0] == "at deeper (component.js:5:9)"  # type: ignore[index]
    result = run_once(runtime, code, "my-source.mjs")
    assert result.error is not None
    assert frames(result.error["stack"])[:3] == ["at deeper (my-source.mjs:5:9)", "at deeper (my-source.mjs:4:21)",
                                                 "at Object.run (my-source.mjs:14:7)"], result.error["stack"]
    logged = "\n".join(entry["message"] for entry in result.logs)
    assert "at deeper (my-source.mjs:5:9)" in logged, logged
    package = run_once(runtime, code.replace("run() {", "run() { explode();", 1), "my-source.mjs").error
    assert package is not None and re.fullmatch(rf"at explode\d* \((?:component\.js|{STORE_FILE}):\d+:\d+\)",
                                                frames(package["stack"])[0]), package


def test_a_map_linked_by_file_name_is_never_read(runtime: Runtime, tmp_path: Path) -> None:
    """esbuild would read a map a comment names: code that links one gets no map at all."""
    linked = tmp_path / "linked.map"
    linked.write_text('{"version": 3, "sources": ["SECRET-NAME"], "names": [], "mappings": "AAAA"}')
    code = (MAPS / "esm_throw.mjs").read_text() + f"//# sourceMappingURL={linked}\n"
    result = run_once(runtime, code)
    assert result.error is not None
    assert "SECRET" not in result.error["stack"]
    assert frames(result.error["stack"])[0] == "at deeper (component.js:27:9)", result.error["stack"]


@pytest.mark.both_modes
def test_errors_and_logs_events_of_the_service_name_the_users_lines(api: httpx.Client) -> None:
    """Through the service, locally and on the emulated AWS runner Lambda (the same bundle): code
    deployed with its file name (`headwater deploy esm_throw.mjs`) has its frames name that file."""
    code = (MAPS / "esm_throw.mjs").read_text()
    for bad in ("../esm_throw.mjs", "esm_throw.json"):
        r = api.post("/sources", json={"component_code": code, "component_file": bad})
        assert r.status_code == 422 and "component_file" in r.json()["details"], r.text
    r = api.post("/sources", json={"component_code": code, "component_file": "esm_throw.mjs"})
    assert r.status_code == 200, r.text
    source = r.json()["data"]
    component = api.get(f"/components/{source['component_id']}").json()["data"]
    assert component["component_file"] == "esm_throw.mjs", component
    assert api.post(f"/sources/{source['id']}/run", json={}).status_code < 300
    [error] = wait_events(api, source["id"], 1, event_name="$errors")
    assert "at deeper (esm_throw.mjs:5:9)" in error["event"]["error"]["stack"], error
    logged = wait_events(api, source["id"], 1, event_name="$logs")[0]["event"]["message"]
    assert "at deeper (esm_throw.mjs:5:9)" in logged, logged
    r = api.post("/components/run", json={"component_code": code, "component_file": "esm_throw.mjs"})
    assert r.status_code == 200, r.text
    assert "at deeper (esm_throw.mjs:5:9)" in r.json()["data"]["error"]["stack"], r.text
