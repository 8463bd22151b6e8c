-- The demo: the duties it seeds, deleted before it seeds them afresh.
DELETE FROM duly_duty
WHERE organization_id = %(organization_id)s AND id = ANY(%(seeded)s)
