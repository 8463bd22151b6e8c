-- invocation: whether a scoped run's organization_id / duty_ids name any duty
-- at all (dispatchable or not), so that a scope matching nothing is said, not
-- reported as a quiet success. Slot: {scope}, without the resume point.
SELECT EXISTS (SELECT 1 FROM duly_duty d WHERE {scope})
