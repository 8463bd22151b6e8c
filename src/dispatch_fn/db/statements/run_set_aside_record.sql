-- ledger.record_set_aside: the duties a finished run set aside, one row each,
-- in one autocommit statement after its last page.
INSERT INTO duly_dispatch_set_aside (run_id, duty_id, reason, owed_from)
SELECT %(run_id)s, s.duty_id, s.reason, %(owed_from)s
FROM unnest(%(duty_ids)s::text[], %(reasons)s::text[]) AS s(duty_id, reason)
ON CONFLICT DO NOTHING
