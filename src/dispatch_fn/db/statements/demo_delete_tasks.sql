-- The demo: the tasks of the duties it seeds, deleted before it seeds them afresh.
DELETE FROM duly_task
WHERE organization_id = %(organization_id)s AND duty_id = ANY(%(seeded)s)
