"""``python -m tcplan``: the command line."""
from tcplan.planner.cli import entry_point

entry_point()
