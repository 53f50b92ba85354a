"""EventDeletionFunction: event range deletions and the purge of deleted sources."""

from headwater.entrypoints.aws import runtime

handler = runtime.sqs_handler("Deletions")
