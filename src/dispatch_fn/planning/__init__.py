"""What a run owes: the planner, the calendar's edge, the run's request. Pure."""
