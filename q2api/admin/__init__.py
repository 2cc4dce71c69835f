"""The admin room: the operator's surfaces.

* `/metrics` (:mod:`q2api.admin.metrics`): Prometheus counts, no auth, never a secret;
* the admin API (`/admin/api/…`, :mod:`q2api.admin.routes`): operate the accounts of a
  running gateway. Enabled by `Q2API_ADMIN_KEY` alone; without it none of its routes
  exist. It works through the account store and pool the gateway already has (never
  the request or reply stages), answers JSON without a secret in it, and logs every
  request it serves: who ("admin"), what, and on which account.
"""
