"""The runner's memory follows the components in use: describing many components (a registry
publish) leaves only the few most recent loaded, not one worker per component ever described."""

from __future__ import annotations

from pathlib import Path

from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.ports import Instance
from headwater.settings import Settings

COMPONENT = """export default {{
  name: "Described {n}", version: "1.0.0",
  props: {{ http: "$.interface.http" }},
  async run(event) {{ this.$emit({{ n: {n} }}) }},
}};"""


def test_described_components_do_not_stay_loaded_but_running_ones_do(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, runner_processes=2)
    bundler, pool = LocalBundler(settings), NodeRunnerPool(settings)
    try:
        bundles = [bundler.bundle(COMPONENT.format(n=n)) for n in range(6)]
        for n, bundle in enumerate(bundles):
            assert pool.describe(bundle, 10_000).value.name == f"Described {n}"
        stats = pool.call("ping", {})
        assert stats["meta_workers"] == stats["workers"] == 2, stats
        for n, bundle in enumerate(bundles[:3]):
            instance = Instance(id=f"dc_{n}", props={}, account="a")
            assert pool.run(bundle, instance, {}, 10_000).emits[0].event == {"n": n}
        assert pool.call("ping", {}, account="account:a")["workers"] == 3  # in use: kept warm
    finally:
        pool.close()
