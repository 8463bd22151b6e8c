-- The demo: how many tasks its organisation holds.
SELECT count(*) AS tasks
FROM duly_task
WHERE organization_id = %(organization_id)s
