"""RunQueueFunction: runs of sources and workflows, timer ticks of the sub-minute chain, schedule syncs."""

from headwater.entrypoints.aws import runtime

handler = runtime.sqs_handler("Runs")
