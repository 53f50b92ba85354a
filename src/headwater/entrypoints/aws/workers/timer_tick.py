"""TimerTickFunction: the target of the timer sources' EventBridge Scheduler schedules."""

from headwater.entrypoints.aws import runtime

handler = runtime.timer_handler()
