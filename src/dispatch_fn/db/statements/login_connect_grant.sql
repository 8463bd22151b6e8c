-- The deploy's custom resource: the dispatcher's login may connect to this
-- database as a member of its role; migration 0009.
GRANT CONNECT ON DATABASE {database} TO {role}
