-- The deploy's custom resource: the login joins a role: this
-- database's dispatcher role, or rds_iam for IAM authentication.
GRANT {role} TO {login}
