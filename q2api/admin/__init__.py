"""The admin room: the operator's surfaces (metrics; the admin API and console)."""
