-- The demo: pause the duties it seeded broken, once their fault has been shown.
UPDATE duly_duty SET status = 'paused'
WHERE organization_id = %(organization_id)s AND id = ANY(%(duty_ids)s)
