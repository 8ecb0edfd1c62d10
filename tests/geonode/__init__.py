"""The Geonode fetcher through whole crawls: batches, faults, concurrency, hybrid fetching."""
