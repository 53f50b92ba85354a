"""The embedded deployment: SQLite under a data dir and a pool of Node runner processes."""
