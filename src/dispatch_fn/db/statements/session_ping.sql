-- One round trip to find out whether a cached session is still alive
-- (database.ConnectionCache): a restart, failover or idle timeout between two
-- invocations kills it without telling the client.
SELECT 1
