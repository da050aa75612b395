"""The token file ``headway login`` (and ``headway.experimental.client.login``) writes and every
client reads: ``$HEADWAY_HOME/token.json`` (default ``~/.headway``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

TOKEN_FILE_NAME = "token.json"


def headway_home() -> Path:
    """The CLI's state directory: ``$HEADWAY_HOME`` or ``~/.headway``."""
    return Path(os.environ.get("HEADWAY_HOME") or Path.home() / ".headway")


def token_file() -> Path:
    """Path of the token file: a JSON object ``{master_url: {"token", "username"}}``."""
    return headway_home() / TOKEN_FILE_NAME


def _read_tokens() -> dict[str, Any]:
    try:
        data = json.loads(token_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_token(master: str) -> str | None:
    """The token ``headway login`` saved for ``master``, or None."""
    entry = _read_tokens().get(master.rstrip("/"))
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) and token else None


def save_token(master: str, token: str, username: str) -> Path:
    """Store ``token`` for ``master`` (other masters' tokens are kept); file mode 0600.

    Written to a temporary file and renamed, so a crash never leaves half a file.
    """
    tokens = _read_tokens()
    tokens[master.rstrip("/")] = {"token": token, "username": username}
    path = token_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(tokens, fh, indent=2)
    os.chmod(tmp, 0o600)  # O_CREAT's mode does not apply when the file already existed
    os.replace(tmp, path)
    return path


def resolve_token(master: str) -> str | None:
    """``$HEADWAY_TOKEN`` if set, else the saved token for ``master``, else None."""
    return os.environ.get("HEADWAY_TOKEN") or read_token(master)
