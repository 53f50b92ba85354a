"""The HTTP interface: one module per route group."""
