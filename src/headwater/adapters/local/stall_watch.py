"""The StallWatch port over SQLite: the `stall_watch` table, read by its `check_at` index."""

from __future__ import annotations

from headwater.adapters.local.process_share import ProcessShare
from headwater.adapters.local.sqlite.database import Database


class SqliteStallWatch:
    def __init__(self, db: Database, share: ProcessShare | None = None) -> None:
        """`share`: the sources whose stalls this serving process looks for."""
        self.db = db
        self.share = share or ProcessShare(0, 1)

    def arm(self, source_id: str, check_at: float) -> None:
        with self.db.writing() as conn:
            conn.execute("INSERT INTO stall_watch (source_id, check_at) VALUES (?, ?) "
                         "ON CONFLICT(source_id) DO UPDATE SET check_at = excluded.check_at", (source_id, check_at))

    def disarm(self, source_id: str) -> None:
        with self.db.writing() as conn:
            conn.execute("DELETE FROM stall_watch WHERE source_id = ?", (source_id,))

    def due(self, now: float, limit: int) -> list[tuple[str, float]]:
        rows = self.db.connection().execute(
            "SELECT source_id, check_at FROM stall_watch WHERE check_at <= ? ORDER BY check_at LIMIT ?",
            (now, limit * self.share.count)).fetchall()
        return [(source_id, at) for source_id, at in rows if self.share.owns(source_id)][:limit]

    def move(self, source_id: str, seen: float, check_at: float) -> bool:
        with self.db.writing() as conn:
            return conn.execute("UPDATE stall_watch SET check_at = ? WHERE source_id = ? AND check_at = ?",
                                (check_at, source_id, seen)).rowcount == 1
