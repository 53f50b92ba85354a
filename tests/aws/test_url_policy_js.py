"""The AWS runner's egress proxy checks addresses with a JS port of domain/urls.py
(layers/runner/src/url-policy.mjs): one list of hosts, in every spelling the policy knows, and
names with fixed answers, goes through both, under each combination of the operator's switches;
the answers (addresses, or the refusal's sentence) must be the same."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from headwater.domain.urls import Refused, Unresolved, allowed_addresses
from headwater.settings import Settings

POLICY = Path(__file__).resolve().parents[2] / "layers" / "runner" / "src" / "url-policy.mjs"

NAMES = {
    "public.test": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    "mixed.test": ["8.8.8.8", "10.0.0.1"],
    "loop.test": ["::1"],
    "mapped.test": ["::ffff:8.8.8.8"],
    "twice.test": ["8.8.8.8", "8.8.8.8"],
    "empty.test": [],
}

HOSTS = [
    # IPv4, in dotted quad and the spellings inet_aton reads
    "127.0.0.1", "127.1", "0177.0.0.1", "2130706433", "0x7f.1", "0x7f000001", "0x7F.0.0.1", "127.0.0.01",
    "10.0.0.1", "172.16.5.4", "172.32.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "100.128.0.1",
    "0.0.0.0", "0", "0.1.2.3", "8.8.8.8", "1.1.1.1", "224.0.0.1", "240.0.0.1", "255.255.255.255", "192.0.0.9",
    "192.0.0.8", "192.0.0.170", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9", "01.02.03.04",
    "1.2.3", "0x", "999.1.1.1", "1.2.3.256", "08.1.1.1", "4294967295", "4294967296", " 8.8.8.8 ",
    # IPv6, bracketed or not, with zones, and the ones that carry IPv4 addresses
    "::1", "[::1]", "::", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "[::ffff:7f00:1]",
    "::127.0.0.1", "::8.8.8.8", "::2", "2002:7f00:1::", "2002:0808:0808::1", "64:ff9b::7f00:1",
    "64:ff9b::808:808", "64:ff9b:1::a00:1", "64:ff9b:1::808:808", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:0:808:808:0:0:f7f7:f7f7", "2001:db8::1", "fe80::1", "fe80::1%eth0", "[fe80::1%25eth0]", "fc00::1",
    "fd12:3456::1", "ff02::1", "2606:4700:4700::1111", "2001:4860:4860::8888", "100::1", "2001:2::1",
    "2001:20::1", "1::", "1:2:3:4:5:6:7::", "::1:2:3:4:5:6:7", "a:b:c:d:e:f:1.2.3.4", "fec0::1", "4000::1",
    "2001:db8:0:0:1:0:0:1", "2a00:1450:0:0:0:0:0:0", "[2606:4700::1111]",
    # names
    *NAMES, "gone.test", "localhost.test",
]


def python_answer(host: str, allow_loopback: bool, allow_private: bool) -> list[Any]:
    def resolve(name: str) -> list[str]:
        if name not in NAMES:
            raise OSError("unknown")
        return NAMES[name]
    try:
        return ["ok", allowed_addresses(host, resolve, allow_loopback, allow_private)]
    except Unresolved as e:
        return ["unresolved", str(e)]
    except Refused as e:
        return ["refused", str(e)]


JS = """
import { allowedAddresses, Refused, Unresolved } from %s
const { names, cases } = JSON.parse(process.argv[2])
const resolve = async (name) => { if (!Object.hasOwn(names, name)) throw new Error('unknown'); return names[name] }
const out = []
for (const [host, loopback, priv] of cases) {
  try { out.push(['ok', await allowedAddresses(host, resolve, () => [loopback, priv])]) }
  catch (e) {
    out.push([e instanceof Unresolved ? 'unresolved' : e instanceof Refused ? 'refused' : 'threw ' + e, e.message])
  }
}
console.log(JSON.stringify(out))
"""


def test_the_js_policy_answers_as_the_python_one(tmp_path: Path) -> None:
    cases = [[host, lo, priv] for host in HOSTS for lo in (False, True) for priv in (False, True)]
    (tmp_path / "policy.mjs").write_text(JS % json.dumps(POLICY.as_uri()))
    argv = [str(Settings().node), str(tmp_path / "policy.mjs"), json.dumps({"names": NAMES, "cases": cases})]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    js = json.loads(proc.stdout)
    differ = [(case, python_answer(*case), got) for case, got in zip(cases, js, strict=True)
              if python_answer(*case) != got]
    assert differ == [], "\n".join(map(str, differ))
    refused = sum(python_answer(*c)[0] == "refused" for c in cases)
    assert 0 < refused < len(cases)  # the list has both
