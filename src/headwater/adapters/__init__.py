"""Adapters: the local (SQLite, Node pool) and AWS implementations of the ports."""
