-- The deploy's custom resource: whether a role named %(role)s exists (rds_iam
-- only exists on RDS).
SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %(role)s) AS found
