"""The runner's platform module (layers/runner/platform/index.js) loads axios at its first request,
not with the platform: a describe worker (one per component published) never needs it, and it was
most of such a worker's start. Its `axios` still reads and sets what an axios instance has."""

from __future__ import annotations

import json
import subprocess

from headwater.settings import Settings

SCRIPT = """
const platform = require('./platform/index.js')
const loaded = () => Object.keys(require.cache).some((f) => f.includes('/node_modules/axios/'))
const before = loaded()
const { axios } = platform
const made = axios.create({ baseURL: 'http://127.0.0.1:9' })
const afterCreate = loaded()
const created = made.defaults.baseURL
axios.defaults.timeout = 1234
const real = require('axios')
console.log(JSON.stringify({
  before, afterCreate, created, after: loaded(), timeout: real.defaults.timeout,
  interceptors: axios.interceptors === real.interceptors,
}))
"""


def test_axios_is_loaded_at_its_first_use_and_behaves_as_before() -> None:
    settings = Settings()
    out = subprocess.run([str(settings.node), "-e", SCRIPT], cwd=settings.runner_dir, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert json.loads(out) == {"before": False, "afterCreate": False, "created": "http://127.0.0.1:9", "after": True,
                               "timeout": 1234, "interceptors": True}
