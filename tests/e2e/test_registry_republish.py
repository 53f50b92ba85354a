"""Publishing a generated registry tree (issue 24; tests/e2e/registry_tree.py): what each
component costs on disk (its own code and its SDK, no copy of the platform), the peak memory of
the publishing processes as the tree grows fourfold (it must not grow with it), and publishing
again: by content hash per component (its file, the files its relative imports reach, their
package.json) an unchanged component is `unchanged` (nothing bundled, described or stored: the
same id), and a changed file publishes again only the components that import it."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.conftest import HEADWATER, Server
from tests.e2e.native_packages import write_store
from tests.e2e.registry_tree import Measured, disk_bytes, generate, measure, sdk_bytes

SDK_KB = 100


BROKEN = "app0/actions/broken/broken.mjs"  # a native addon on its path: fails, alone in its batch


def publish(server: Server, root: Path, *options: str, remembered: bool = False) -> tuple[Measured, dict[str, dict]]:
    measured = measure([*HEADWATER, "registry", "publish", str(root), "--data-dir", str(server.data_dir), "--json",
                        "--keep-npm-store", *options], server.env)  # its store is its npm registry
    assert measured.result.get("failed") == 1, measured.result
    results = {r["file"]: r for r in measured.result["results"]}
    broken = results.pop(BROKEN)
    assert broken["reason"].startswith('npm package "hwtest-real" loads a native addon')
    # a failure is remembered by content hash, as a success is: not bundled again while unchanged
    assert (broken["remembered"], broken["transient"]) == (remembered, False), broken
    return measured, results


def test_publishing_a_tree_costs_per_component_what_it_bundles_and_again_only_what_changed(
        server: Server, tmp_path: Path) -> None:
    prefix = "hwtest" + uuid.uuid4().hex[:6]
    store, bundles = server.data_dir / "npm-store", server.data_dir / "bundles"
    generate(tmp_path, store, apps=1, per_app=2, sdk_kb=SDK_KB, prefix=prefix)
    write_store(store)
    (tmp_path / BROKEN).parent.mkdir(parents=True)
    (tmp_path / BROKEN).write_text('import real from "hwtest-real@1.0.0";\n'
                                   f'export default {{ key: "{prefix}-broken", name: "b", version: "1",\n'
                                   '  run() { return real } };\n')
    disk_before = disk_bytes(bundles)
    small, first = publish(server, tmp_path)
    assert {r["status"] for r in first.values()} == {"published"} and len(first) == 2, first
    per_component = (disk_bytes(bundles) - disk_before) / 2
    assert per_component < sdk_bytes(SDK_KB) + 40_000, per_component  # no platform and axios copy (~550 KB)

    generate(tmp_path, store, apps=4, per_app=2, sdk_kb=SDK_KB, prefix=prefix)  # 4x the components
    large, grown = publish(server, tmp_path, remembered=True)
    assert {f for f, r in grown.items() if r["status"] == "unchanged"} == set(first)
    assert sum(r["status"] == "published" for r in grown.values()) == 6
    # peak memory per component falls as the tree grows: it does not grow with the components (4x would)
    assert large.peak_rss_bytes < 2 * small.peak_rss_bytes, (small.peak_rss_bytes, large.peak_rss_bytes)

    _, again = publish(server, tmp_path, remembered=True)
    assert {f: r["status"] for f, r in again.items()} == {f: "unchanged" for f in grown}
    assert {f: r["id"] for f, r in again.items()} == {f: r["id"] for f, r in grown.items()}

    (tmp_path / "app1" / "common" / "base.mjs").write_text(
        (tmp_path / "app1" / "common" / "base.mjs").read_text() + "// changed\n")
    _, changed = publish(server, tmp_path, "--retry-failed")
    republished = {f for f, r in changed.items() if r["status"] == "published"}
    assert republished == {f for f in grown if f.startswith("app1/")} and len(republished) == 2
    assert all(changed[f]["id"] == grown[f]["id"] for f in grown if f not in republished)
    assert all(changed[f]["id"] != grown[f]["id"] for f in republished)
