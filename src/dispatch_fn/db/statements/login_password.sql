-- The password slot holds a SCRAM-SHA-256 verifier the client computed
-- (scram.py): the server stores it as it is, and never sees the password.
ALTER ROLE {login} PASSWORD {verifier}
