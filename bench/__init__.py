"""Benchmarks of Headwater on this machine; `bench/run.py` (`make bench`) runs them all side by side with peers."""
