"""Entry points of deployments other than `headwater serve`: the Lambda handlers (aws/)."""
