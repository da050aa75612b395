"""``headway login``: exchange a username and password for a token and save it."""

from __future__ import annotations

import argparse
import getpass

from pydantic import ValidationError

from headway.cli._common import CLIError, make_session, master_url
from headway.client import save_token, wire


def cmd_login(args: argparse.Namespace) -> int:
    """``headway login``: exchange username/password for a token and save it."""
    try:
        username = args.username or input("Username: ").strip()
        password = args.password if args.password is not None else getpass.getpass("Password: ")
    except EOFError:
        raise CLIError("no username/password given (use --username and --password)", 2) from None
    if not username:
        raise CLIError("a username is required", 2)
    session = make_session(args, authenticated=False)
    answer = session.post("auth/login/", json={"username": username, "password": password})
    try:
        token = wire.LoginAnswer.model_validate(answer).token
    except ValidationError:
        token = ""
    if not token:
        raise CLIError(f"the master answered the login without a token: {answer!r}")
    path = save_token(master_url(args), token, username)
    print(f"Logged in to {master_url(args)} as {username} (token saved in {path})")
    return 0
