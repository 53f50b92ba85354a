"""The content hash `registry publish` skips unchanged files by (services/publish_cache.py)."""

from __future__ import annotations

from pathlib import Path

from headwater.services.publish_cache import PublishCache, Record, fingerprint


def tree(root: Path) -> Path:
    (root / "app" / "common").mkdir(parents=True)
    (root / "app" / "package.json").write_text('{"dependencies": {"axios": "^1"}}')
    (root / "app" / "app.app.mjs").write_text("export default { type: 'app', app: 'x' }\n")
    (root / "app" / "common" / "util.js").write_text("module.exports = 1\n")
    (root / "app" / "common" / "unused.mjs").write_text("export const u = 1\n")
    entry = root / "app" / "sources" / "a" / "a.mjs"
    entry.parent.mkdir(parents=True)
    entry.write_text('import app from "../../app.app.mjs"\nconst u = require("../../common/util")\nexport default {}\n')
    return entry


def test_what_an_entry_reaches_changes_its_hash_and_nothing_else(tmp_path: Path) -> None:
    entry = tree(tmp_path)
    before = fingerprint(tmp_path, entry, "v1")
    assert fingerprint(tmp_path, entry, "v1") == before
    (tmp_path / "app" / "common" / "unused.mjs").write_text("export const u = 2\n")
    assert fingerprint(tmp_path, entry, "v1") == before
    assert fingerprint(tmp_path, entry, "v2") != before  # another release of the bundler
    for changed in ("common/util.js", "app.app.mjs", "package.json"):
        path = tmp_path / "app" / changed
        path.write_text(path.read_text() + " ")
        after = fingerprint(tmp_path, entry, "v1")
        assert after != before, changed
        before = after
    (tmp_path / "app" / "common" / "util.ts").write_text("export default 2\n")  # resolves in front of util.js
    assert fingerprint(tmp_path, entry, "v1") != before


def test_records_are_kept_per_root_and_ignored_when_forced(tmp_path: Path) -> None:
    path = tmp_path / "data" / "registry-publish.json"
    cache = PublishCache(path, tmp_path / "tree", "v1")
    cache.put("a.mjs", Record("f1", "published", "k", "sc_1"))
    cache.save()
    assert PublishCache(path, tmp_path / "tree", "v1").get("a.mjs", "f1") == Record("f1", "published", "k", "sc_1")
    assert PublishCache(path, tmp_path / "tree", "v1").get("a.mjs", "f2") is None
    assert PublishCache(path, tmp_path / "other", "v1").get("a.mjs", "f1") is None
    assert PublishCache(path, tmp_path / "tree", "v1", ignore_records=True).get("a.mjs", "f1") is None


def test_a_lasting_failure_is_remembered_a_transient_one_is_not(tmp_path: Path) -> None:
    from headwater.services.registry import PublishResult, Registry

    cache = PublishCache(tmp_path / "records.json", tmp_path / "tree", "v1")
    lasting = PublishResult("a.mjs", "failed", reason='npm package "x" loads a native addon')
    unreached = PublishResult("b.mjs", "failed", reason="npm package x could not be resolved (npm error ETIMEDOUT)",
                              transient=True)
    Registry._record(cache, lasting, "fa")
    Registry._record(cache, unreached, "fb")
    assert cache.get("a.mjs", "fa") == Record("fa", "failed", reason=lasting.reason)
    assert cache.get("b.mjs", "fb") is None
    assert cache.get("a.mjs", "changed") is None
    cache.save()
    assert PublishCache(tmp_path / "records.json", tmp_path / "tree", "v1").get("a.mjs", "fa") is not None
    retried = PublishCache(tmp_path / "records.json", tmp_path / "tree", "v1", retry_failed=True)
    assert retried.get("a.mjs", "fa") is None


def test_npm_failures_that_are_not_the_package_s_fault_are_transient() -> None:
    from headwater.services.registry import _NPM_UNREACHED

    assert _NPM_UNREACHED.search("npm package ky could not be resolved (npm error ETIMEDOUT)")
    assert _NPM_UNREACHED.search("npm package ky could not be installed (npm error E503)")
    assert _NPM_UNREACHED.search("npm package ky could not be installed (npm exited with status 1)")
    assert not _NPM_UNREACHED.search("npm package ky does not exist")
    assert not _NPM_UNREACHED.search('no version of npm package ky matches "^99"')


def test_a_describe_runner_stopped_at_its_memory_cap_is_transient_a_component_out_of_memory_is_not() -> None:
    from headwater.services.registry import _RUNNER_OUT_OF_MEMORY

    assert _RUNNER_OUT_OF_MEMORY.search("the account's runner ran out of memory (limit 1024 MB) and was stopped;"
                                        " runs in flight were lost")
    assert not _RUNNER_OUT_OF_MEMORY.search("the component ran out of memory (limit 512 MB)")


def test_a_save_with_no_record_changed_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    cache = PublishCache(path, tmp_path / "tree", "v1")
    cache.put("a.mjs", Record("fa", "published", "k", "c_1"))
    cache.save()
    written = path.stat().st_ino
    again = PublishCache(path, tmp_path / "tree", "v1")
    again.put("a.mjs", Record("fa", "published", "k", "c_1"))  # as an unchanged file's publish does
    again.forget("b.mjs")
    again.save()
    assert path.stat().st_ino == written  # not replaced
    again.put("a.mjs", Record("fb", "published", "k", "c_2"))
    again.save()
    assert path.stat().st_ino != written
    assert PublishCache(path, tmp_path / "tree", "v1").get("a.mjs", "fb") == Record("fb", "published", "k", "c_2")
