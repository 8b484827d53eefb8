"""The planner: SBP propagation, Boxing and its cost.  Pure Python, no engine."""
