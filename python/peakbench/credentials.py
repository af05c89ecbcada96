"""SMB passwords stay out of the store: what it keeps has each smb:// target's password removed (a
target object keeps `password_given`, a URL loses its `:password`), and a resumed job that needs the
password takes it from the environment variable PEAKBENCH_SMB_PASSWORD, which the user controls."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from .errors import InputError

PASSWORD_ENV = "PEAKBENCH_SMB_PASSWORD"


def without_passwords(value):
    """`value` (JSON-like) with every SMB password taken out."""
    if isinstance(value, dict):
        kept = {key: without_passwords(item) for key, item in value.items()}
        if value.get("kind") == "smb" and value.get("password"):
            kept["password"] = ""
            kept["password_given"] = True
        return kept
    if isinstance(value, (list, tuple)):
        return [without_passwords(item) for item in value]
    if isinstance(value, str) and value.startswith("smb://"):
        return url_without_password(value)
    return value


def url_without_password(text: str) -> str:
    """smb://user:password@host/... as smb://user@host/..."""
    url = urlsplit(text)
    if url.password is None:
        return text
    return text.replace(f":{url.password}@", "@", 1)


def with_password(target: dict, job: str, store_path) -> dict:
    """A stored target ready to log on again: its password from PEAKBENCH_SMB_PASSWORD if one was given."""
    if not target.get("password_given"):
        return target
    password = os.environ.get(PASSWORD_ENV)
    if not password:
        raise InputError(
            f"{job} logs on to {url_without_password(target.get('url', 'its smb:// target'))} with a password the"
            f" store does not keep: set {PASSWORD_ENV} and resume again",
            file=store_path,
        )
    restored = {key: value for key, value in target.items() if key != "password_given"}
    restored["password"] = password
    return restored
