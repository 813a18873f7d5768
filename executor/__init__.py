"""tcplan executor: functional simulation and cycle model.

Empty until the executor issue (#4) lands; the package exists so the project layout is the one
the design card fixes (model -> planner -> executor).
"""
