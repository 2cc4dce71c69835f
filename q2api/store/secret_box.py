"""Secrets at rest in a shared store: refresh tokens, access tokens and client secrets, Fernet-encrypted.

`Q2API_SECRET_KEY` holds one Fernet key, or several separated by commas to
rotate keys: the first encrypts, every one decrypts (cryptography's
MultiFernet). A new key is made with
`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.
"""

from __future__ import annotations

# cryptography is imported by the first SecretBox: only a shared store has one, and the import
# costs every worker several MB of RSS that the default SQLite store never needs.

SECRET_KEY_VARIABLE = "Q2API_SECRET_KEY"
GENERATE_KEY_HINT = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class SecretKeyMismatch(Exception):
    """A stored secret does not open with any of the configured keys."""


class SecretBox:
    def __init__(self, keys: str) -> None:
        """Raises ValueError when `keys` holds no valid Fernet key (the message shows no key)."""
        from cryptography.fernet import Fernet, MultiFernet

        parts = [part.strip() for part in keys.split(",") if part.strip()]
        if not parts:
            raise ValueError(f"{SECRET_KEY_VARIABLE} is empty; make a key with {GENERATE_KEY_HINT}")
        try:
            self._fernet = MultiFernet([Fernet(part) for part in parts])
        except ValueError:
            raise ValueError(
                f"{SECRET_KEY_VARIABLE} must be Fernet keys (32 url-safe base64-encoded bytes each, "
                f"comma-separated); make one with {GENERATE_KEY_HINT}"
            ) from None

    def seal(self, value: str | None) -> str | None:
        return None if value is None else self._fernet.encrypt(value.encode()).decode("ascii")

    def open(self, value: str | None) -> str | None:
        from cryptography.fernet import InvalidToken

        if value is None:
            return None
        try:
            return self._fernet.decrypt(value.encode("ascii")).decode()
        except InvalidToken:
            raise SecretKeyMismatch(
                f"a stored secret does not decrypt with {SECRET_KEY_VARIABLE}: "
                "the store was written with another key (list the old key after the new one to rotate)"
            ) from None
