-- ledger.one: the duties one run set aside (docs/contract.md#ledger), and which run repaid each.
SELECT duty_id, reason, owed_from, repaid_by
FROM duly_dispatch_set_aside
WHERE run_id = %(id)s
ORDER BY duty_id
