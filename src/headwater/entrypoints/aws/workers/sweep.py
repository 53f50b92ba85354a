"""SweepFunction: every minute, the outbox items no queue took and the timer chains that lost a tick."""

from headwater.entrypoints.aws import runtime

handler = runtime.sweep_handler()
