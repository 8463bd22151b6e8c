-- The tasks that already hold these identities (the unique key
-- duly_task_dispatch_identity, as parallel arrays): what a run's insert would
-- meet and leave alone.
SELECT t.duty_id, t.period_key, t.id AS task_id, t.created_at
FROM duly_task t
JOIN unnest(%(organization_ids)s::text[], %(duty_ids)s::text[], %(owner_ids)s::text[],
            %(period_keys)s::text[]) AS k(organization_id, duty_id, owner_id, period_key)
  ON (t.organization_id, t.duty_id, t.owner_id, t.period_key)
   = (k.organization_id, k.duty_id, k.owner_id, k.period_key)
