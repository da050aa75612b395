"""``headway login``: exchange a username and password for a token and save it."""

from __future__ import annotations

import argparse
import getpass

from headway.cli._common import CLIError, make_api, master_url
from headway.client import save_token


def cmd_login(args: argparse.Namespace) -> int:
    """``headway login``: exchange username/password for a token and save it."""
    try:
        username = args.username or input("Username: ").strip()
        password = args.password if args.password is not None else getpass.getpass("Password: ")
    except EOFError:
        raise CLIError("no username/password given (use --username and --password)", 2) from None
    if not username:
        raise CLIError("a username is required", 2)
    from pydantic import ValidationError  # loaded with the wire models the answer is read into

    try:
        token = make_api(args, authenticated=False).login(username, password).token
    except ValidationError as exc:
        raise CLIError(f"the master answered the login without a token: {exc}") from None
    if not token:
        raise CLIError("the master answered the login with an empty token")
    path = save_token(master_url(args), token, username)
    print(f"Logged in to {master_url(args)} as {username} (token saved in {path})")
    return 0
