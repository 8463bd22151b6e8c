-- (id, form) of up to %(limit)s duties in {scope} whose form is none of
-- %(forms)s: the faults a report lists by id.
SELECT d.id, d.form
FROM duly_duty d
WHERE (d.form IS NULL OR d.form <> ALL(%(forms)s)) AND {scope}
ORDER BY d.id
LIMIT %(limit)s
