"""Native code handled as the original service does (issue 24): a package is refused only when
its code loads a native addon on the component's path; an optional native dependency required
inside a try/catch is left out and the package runs without it. Small local packages of the
shapes real ones have (tests/e2e/native_packages.py), through the sandboxed bundler and a run."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Server
from tests.e2e.native_packages import write_store
from tests.e2e.test_sources_api import wait_events


@pytest.fixture(autouse=True)
def packages(server: Server) -> None:
    write_store(server.data_dir / "npm-store")


def run_once(api: httpx.Client, code: str) -> object:
    r = api.post("/sources", json={"component_code": code})
    assert r.status_code == 200, r.text
    source_id = r.json()["data"]["id"]
    assert api.post(f"/sources/{source_id}/run").status_code == 202
    return wait_events(api, source_id, 1, timeout=60)[0]["event"]


def test_a_native_helper_listed_but_never_required_is_no_addon(api: httpx.Client) -> None:
    code = """import { hello } from "hwtest-listed@1.0.0";
    export default { name: "listed", version: "1", props: {}, run() { this.$emit({ said: hello("world") }) } }"""
    assert run_once(api, code) == {"said": "hello world"}


def test_an_optional_addon_required_in_a_try_catch_is_left_out(api: httpx.Client) -> None:
    code = """import { features } from "hwtest-optional@1.0.0";
    export default { name: "optional", version: "1", props: {}, run() { this.$emit(features()) } }"""
    assert run_once(api, code) == {"cpu": "without", "crypto": "js"}
    bundle = api.post("/components", json={"component_code": code}).json()["data"]
    assert bundle["packages"] == {"hwtest-optional": "1.0.0"}


def test_an_addon_loaded_on_the_path_is_refused_naming_the_package(api: httpx.Client) -> None:
    code = """import real from "hwtest-real@1.0.0";
    export default { name: "real", version: "1", props: {}, run() { return typeof real } }"""
    r = api.post("/components", json={"component_code": code})
    assert r.status_code == 422, r.text
    assert '"hwtest-real"' in r.json()["error"] and "native addon" in r.json()["error"]


def test_a_file_named_like_an_addon_that_resolves_to_javascript_is_bundled(api: httpx.Client) -> None:
    code = """import { ono } from "hwtest-ono@1.0.0";
    export default { name: "ono", version: "1", props: {}, run() { this.$emit(ono("bad")) } }"""
    assert run_once(api, code) == {"message": "bad", "inspected": True}


def test_a_package_listing_the_builtin_modules_loads_and_other_bindings_stay_closed(api: httpx.Client) -> None:
    code = """import { core } from "hwtest-precinct@1.0.0";
    export default { name: "precinct", version: "1", props: {}, run() {
      let fs = "open"
      try { process.binding("fs") } catch (e) { fs = e.code }
      this.$emit({ core: core(["fs", "path", "left-pad"]), fs }) } }"""
    assert run_once(api, code) == {"core": ["fs", "path"], "fs": "ERR_ACCESS_DENIED"}


def test_a_package_with_top_level_await_is_bundled_and_runs(api: httpx.Client) -> None:
    code = """import tla, { loaded } from "hwtest-tla@1.0.0";
    import os from "node:os";
    export default { name: "tla", version: "1", props: { n: { type: "integer", default: 1 } }, run() {
      this.$emit({ ...tla, loaded, eol: os.EOL, n: this.n }) } }"""
    assert run_once(api, code) == {"answer": 42, "sep": "/", "loaded": "after an await", "eol": "\n", "n": 1}


def test_a_component_that_runs_a_program_says_which(api: httpx.Client) -> None:
    code = """import { spawn } from "node:child_process";
    const pattern = /x/; pattern.exec("not a program");
    export default { name: "transcribe", version: "1", props: {},
      run() { return spawn("ffmpeg", ["-i", "in.mp3", "out.wav"]) } }"""
    r = api.post("/components", json={"component_code": code})
    assert r.status_code == 422, r.text
    assert 'system executable "ffmpeg"' in r.json()["error"], r.text


def test_the_default_of_a_packages_mjs_file_is_its_default_export(api: httpx.Client) -> None:
    """A package's `.mjs` file imported by its path gives its default export (the shared package
    store's stand-in of it once gave the module's whole exports: `base.props` undefined)."""
    code = """import base from "hwtest-mjs-base@1.0.0/actions/base.mjs";
    base.props.url.label = "Download URL";
    export default { name: "extends", version: "1", props: { ...base.props }, run() {
      this.$emit({ base: base.name, label: base.props.url.label }) } }"""
    assert run_once(api, code) == {"base": "base", "label": "Download URL"}
