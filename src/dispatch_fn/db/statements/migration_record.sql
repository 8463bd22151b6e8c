-- Records one applied migration, in the same transaction as its script (or
-- after its last statement, for a no-transaction file). Slot: {ledger}.
INSERT INTO {ledger} (version, checksum) VALUES (%(version)s, %(checksum)s)
