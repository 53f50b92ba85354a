"""Headwater: a self-hostable event-source platform."""

__version__ = "0.1.0"
