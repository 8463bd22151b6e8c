-- ledger.continued_run: the link a continuation hands off from. Same clock,
-- window, scope and dry-run flag, the previous hand-off number, stopped at
-- the very duty this one resumes after.
SELECT id FROM duly_dispatch_run
WHERE clock = %(clock)s AND mode = %(mode)s AND dry_run = %(dry_run)s
  AND window_from IS NOT DISTINCT FROM %(window_from)s
  AND window_to IS NOT DISTINCT FROM %(window_to)s
  AND organization_id IS NOT DISTINCT FROM %(organization_id)s
  AND duty_ids IS NOT DISTINCT FROM %(duty_ids)s
  AND continuation = %(previous)s AND status = 'incomplete'
  AND report ->> 'last_duty_id' IS NOT DISTINCT FROM %(resume_after)s
ORDER BY id DESC
LIMIT 1
