-- Who runs the migration step (the owner, never the dispatcher's login) and where.
SELECT current_user AS login, current_database() AS database
