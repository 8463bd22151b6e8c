"""Benchmarks: the period engine's throughput, and the dispatcher against PostgreSQL's floor."""
