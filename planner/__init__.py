"""tcplan planner: problem specs, CP-SAT search, diagnostics and the command-line interface."""
