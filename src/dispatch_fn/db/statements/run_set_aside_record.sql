-- ledger.record_set_aside: the duties a finished run set aside, one row each,
-- in one autocommit statement after its last page; afresh: the run was
-- judging the duty afresh (migration 0022).
INSERT INTO duly_dispatch_set_aside (run_id, duty_id, reason, owed_from, afresh)
SELECT %(run_id)s, s.duty_id, s.reason, %(owed_from)s, s.afresh
FROM unnest(%(duty_ids)s::text[], %(reasons)s::text[], %(afresh)s::boolean[])
    AS s(duty_id, reason, afresh)
ON CONFLICT DO NOTHING
