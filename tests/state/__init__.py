"""The state's unit tests, without a crawl: StateStore's records and queue, SQL,
schema, migrations, locking, leases and the storage contract."""
