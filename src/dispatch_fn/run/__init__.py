"""One run: the settling machine and its driver, the scheduler, catch-up, hand-off."""
