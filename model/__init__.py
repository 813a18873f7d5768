"""tcplan hardware model: mapping expressions, rules, constants and config derivation.

The model is pure: it never imports the planner or the executor.
"""
