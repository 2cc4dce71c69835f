"""What every worker and replica of one deployment shares about the accounts: their in-flight slots and
their hosts' rests, counted in Redis (`Q2API_REDIS_URL`) or, without it, in the store."""
