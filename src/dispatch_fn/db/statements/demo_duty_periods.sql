-- The demo: one duty's frequency and zone, and the period keys of its tasks, in order.
SELECT d.frequency, d.timezone,
       coalesce(string_agg(t.period_key, ' ' ORDER BY t.period_key), '') AS period_keys
FROM duly_duty d
LEFT JOIN duly_task t ON t.duty_id = d.id
WHERE d.id = %(duty_id)s
GROUP BY d.frequency, d.timezone
