"""The request lifecycle: one request from its body to its last byte, whichever door it came by.

The relay (`relay.py`) reads the body through its door, prepares it off the event loop when it is
large (`off_loop.py`), admits it against its client key's limits (`tenancy.py`), opens the reply
(`reply.py`, with the calls of a compacting reply: `compaction_plan.py`), holds, streams
(`streaming.py`) or aggregates it, stops when the client leaves (`disconnects.py`), and writes the
request's log lines (`exchange_log.py`, `conversion_log.py`).

It takes a body, the request's headers and a disconnect signal (an ASGI `receive`), never a
Starlette `Request`: the Starlette shell (q2api.server.app, q2api.server.doors and the endpoints)
admits the client, reads the body and hands it here, so that most of the lifecycle is tested
without a socket (tests/server/lifecycle/). An import contract keeps the shell out of it.
"""
