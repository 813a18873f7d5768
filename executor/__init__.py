"""tcplan executor: functional simulation of lowered configs over simulated memories,
verification by the holding rule, and `tcplan verify` / `tcplan run` (the cycle model itself is
the pure function in :mod:`model.cost`)."""
