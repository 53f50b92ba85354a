"""Pure core logic: no I/O, testable on its own."""
