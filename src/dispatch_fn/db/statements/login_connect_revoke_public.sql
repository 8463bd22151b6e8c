-- Again on every deploy, as in migration 0009: a database restored or cloned
-- from another starts with PUBLIC's default CONNECT.
REVOKE CONNECT ON DATABASE {database} FROM PUBLIC
