"""Privacy mechanisms. Each takes numpy arrays of true counts plus a budget and an RNG,
and returns private counts plus an error model (:mod:`dpsql.accuracy`). They know
nothing of SQL or DuckDB. Release building loops over levels, never over nodes."""
