"""Issue 34: a source's `this.db` (which may hold secrets its component stored) and its snapshots
are its owner's alone. To a user of another namespace a state read, a patch, the snapshot list
and a restore of the source answer 404 (never 403: the source's existence is not told) and change
nothing; on both backends. Shown to fail with the services' namespace check taken out."""

from __future__ import annotations

from tests.conftest import Server, client_for, new_user

SECRET_KEEPER = """export default {
  name: "Keeper", version: "1.0.0", type: "source",
  props: { db: "$.service.db" },
  hooks: { async deploy() { this.db.set("api_token", "tok-5e1d9a7c"); } },
  async run() {},
};
"""


def test_another_namespace_cannot_read_patch_list_or_restore_a_sources_state(server: Server) -> None:
    with client_for(server, new_user(server).api_key) as owner, client_for(server, new_user(server).api_key) as eve:
        r = owner.post("/sources", json={"component_code": SECRET_KEEPER})
        assert r.status_code == 200, r.text
        source_id = r.json()["data"]["id"]
        [snapshot] = owner.get(f"/sources/{source_id}/state/snapshots").json()["data"]
        before = owner.get(f"/sources/{source_id}/state").json()["data"]
        assert before["db"] == {"api_token": "tok-5e1d9a7c"}

        answers = [
            eve.get(f"/sources/{source_id}/state"),
            eve.patch(f"/sources/{source_id}/state", json={"api_token": "eve-was-here"}),
            eve.get(f"/sources/{source_id}/state/snapshots"),
            eve.post(f"/sources/{source_id}/state/restore", json={"snapshot_id": snapshot["id"]}),
        ]
        assert [a.status_code for a in answers] == [404, 404, 404, 404], [a.text for a in answers]
        assert all("tok-5e1d9a7c" not in a.text for a in answers)
        assert owner.get(f"/sources/{source_id}/state").json()["data"] == before
        assert [s["id"] for s in owner.get(f"/sources/{source_id}/state/snapshots").json()["data"]] == [snapshot["id"]]


SECRET_COPIER = """export default {
  name: "Copier", version: "1.0.0", type: "source",
  props: { db: "$.service.db", token: { type: "string", secret: true } },
  hooks: {
    async deploy() { this.db.set("copy", this.token); this.db.set(`key-${this.token}`, [`Bearer ${this.token}`]); },
  },
  async run() {},
};
"""


def test_a_secret_props_value_never_appears_in_a_state_answer(server: Server) -> None:
    secret = "sk-live-7f3a91c2e8"
    with client_for(server, new_user(server).api_key) as owner:
        r = owner.post("/sources", json={"component_code": SECRET_COPIER, "configured_props": {"token": secret}})
        assert r.status_code == 200, r.text
        source_id = r.json()["data"]["id"]
        read = owner.get(f"/sources/{source_id}/state")
        patched = owner.patch(f"/sources/{source_id}/state", json={"other": 1})
        [snapshot] = owner.get(f"/sources/{source_id}/state/snapshots").json()["data"]
        restored = owner.post(f"/sources/{source_id}/state/restore", json={"snapshot_id": snapshot["id"]})
        for answer in (read, patched, restored):
            assert answer.status_code == 200, answer.text
            assert secret not in answer.text
            db = answer.json()["data"]["db"]
            assert db["copy"] == "[secret]" and db["key-[secret]"] == ["Bearer [secret]"]
