-- ledger.one: the duties one run set aside (docs/contract.md#set-aside): each one's id,
-- organisation where the run told it from a namesake (migration 0022), reason, the
-- clock it was owed from, and, on rows from before migration 0012, the run that repaid it.
SELECT duty_id, organization_id, reason, owed_from, repaid_by
FROM duly_dispatch_set_aside
WHERE run_id = %(id)s
ORDER BY duty_id, organization_id
