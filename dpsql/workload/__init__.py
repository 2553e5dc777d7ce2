"""Workload-optimal releases: predict a spec's error on the curator's queries, before any
budget is spent, and choose its budget split for them.

* :mod:`dpsql.workload.predict` plans each query as the planner would on a dry run of the
  spec and takes the planner's predicted error (no second error model);
* :mod:`dpsql.workload.optimise` chooses view shares, per-level weights and covariances.

This package sits above the planner and the release builder (it runs dry runs, which
draw stand-in noise on all-zero data and read nothing), below the CLI.
"""
