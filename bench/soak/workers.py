"""Which gateway process answered a connection: the kernel's socket tables, read from /proc.

uvicorn's `--workers` share one listening socket, and the kernel hands each new connection to one
of them; the soak needs to know which, to show a revoked key is refused by every worker. The server
side of a loopback connection is the socket whose local port is the gateway's and whose remote port
is the client's; its inode appears among the descriptors of exactly one process.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _server_socket_inode(server_port: int, client_port: int) -> str | None:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, inode = fields[1], fields[2], fields[9]
                if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                    return inode
    return None


def serving_process(server_port: int, client_port: int, candidates: list[int]) -> int | None:
    """The pid among `candidates` holding the server side of the connection from `client_port`."""
    inode = _server_socket_inode(server_port, client_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                        return pid
    return None
