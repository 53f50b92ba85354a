"""Source leases of the local service: every holder is in this one process, so the in-process
lease table is the lease: a source's order and exclusion live there, nowhere else."""

from __future__ import annotations

from headwater.adapters.in_process_lease import InProcessLease


class LocalLease(InProcessLease):
    pass
