"""The admin room: the operator's surfaces.

* the admin API (`/admin/api/…`, :mod:`q2api.admin.routes`): operate the accounts of a
  running gateway. Enabled by `Q2API_ADMIN_KEY` alone; without it none of its routes
  exist. It works through the account store and pool the gateway already has (never
  the request or reply stages), answers JSON without a secret in it, and logs every
  request it serves: who ("admin"), what, and on which account;
* the web console (`/console`, :mod:`q2api.admin.console_routes`), static files over the admin API.

It depends on the server (the gateway it operates), never the reverse: the server's `/metrics`
and the activity ring are the server's own (`q2api.server.metrics`, `q2api.server.activity`).
"""
