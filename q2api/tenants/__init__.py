"""Client keys as tenants: keys kept in the store with their limits, the counters that hold them to
those limits (Redis or the store), and the usage ledger of every request (docs/keys-and-usage.md)."""
