"""The one error a store's database raises when it fails, and what a store call may raise besides."""

from __future__ import annotations

import sqlite3

from q2api.store.secret_box import SecretKeyMismatch


class StoreUnavailable(Exception):
    """The shared database could not be reached or refused the query (the message names no secret)."""


# What a store call may raise when the store itself fails (not the caller's input).
# SecretKeyMismatch: a row written with another key cannot be read, as if the store failed on it.
STORE_ERRORS: tuple[type[Exception], ...] = (OSError, sqlite3.Error, StoreUnavailable, SecretKeyMismatch)
