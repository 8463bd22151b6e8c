-- The deploy's custom resource: the login leaves the role
-- shared by every database migrated before 0009.
REVOKE {role} FROM {login}
