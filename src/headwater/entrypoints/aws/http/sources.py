"""SourcesFunction: /v1/sources (deploy, update, delete, manual run) and the lists of sources, and
the connected accounts whose credentials sources use (it may seal and open secrets); a new version
tried on a source's recorded traffic (it runs code like the hooks, reads runs and events); a
source's `this.db`, its snapshots and restores (a restore runs hooks, as an update does)."""

from headwater.api import connected_accounts, source_trials, sources, state
from headwater.entrypoints.aws import runtime

handler = runtime.api_handler("Sources", [sources.router, connected_accounts.router, source_trials.router,
                                          state.router])
