"""Who may use the API: the Host a request names (the allow list the app keeps) and its client key.

The allow list is the app's (built from the settings in `create_app`, kept in `app.state`), so that
the endpoints, defined at module level, reach it through the connection like the gateway itself.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from q2api.server.cross_site import HostAllowList
from q2api.server.gateway import gateway_of
from q2api.server.lifecycle.tenancy import Caller

HOSTS_STATE = "host_allow_list"  # its name in `app.state`


def hosts_of(connection: HTTPConnection) -> HostAllowList:
    hosts = getattr(connection.app.state, HOSTS_STATE, None)
    if not isinstance(hosts, HostAllowList):  # an endpoint served outside `create_app`'s app: a bug
        raise RuntimeError("the app has no Host allow list (it was not built by create_app)")
    return hosts


async def admit(connection: HTTPConnection) -> Caller:
    """The client may use the API: its Host may be answered, and it has a client key if keys are set
    (an environment key, or a store key neither revoked nor expired)."""
    hosts_of(connection).check(connection)
    return await gateway_of(connection).tenancy.identify(connection)
