-- The demo: the duties of its organisation that it did not seed, which it keeps.
SELECT id
FROM duly_duty
WHERE organization_id = %(organization_id)s AND id <> ALL(%(seeded)s)
ORDER BY id
