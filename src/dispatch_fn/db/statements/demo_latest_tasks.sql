-- The demo: the latest task of each of these duties, with its due date and lateness.
SELECT DISTINCT ON (t.duty_id) t.duty_id, t.period_key, t.due_date, t.late_after
FROM duly_task t
WHERE t.organization_id = %(organization_id)s AND t.duty_id = ANY(%(duty_ids)s)
ORDER BY t.duty_id, t.period_key DESC
