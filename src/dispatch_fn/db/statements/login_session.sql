-- Who runs the migration step (the owner, never the dispatcher's login) and where.
SELECT current_user, current_database()
