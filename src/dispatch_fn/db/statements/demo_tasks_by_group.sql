-- The demo: its organisation's tasks, counted by their duty's zone and frequency.
SELECT d.timezone, d.frequency, count(*) AS tasks
FROM duly_task t
JOIN duly_duty d ON d.id = t.duty_id
WHERE t.organization_id = %(organization_id)s
GROUP BY 1, 2
