"""``headway checkpoint list | download``."""

from __future__ import annotations

import argparse
import tarfile
from pathlib import Path

import requests

from headway.cli._common import CLIError, fetch_all, make_session
from headway.cli._output import fmt_size, fmt_time, print_table


def cmd_list(args: argparse.Namespace) -> int:
    """Table of an experiment's checkpoints, newest first."""
    checkpoints = fetch_all(make_session(args), f"experiments/{args.experiment_id}/checkpoints/")
    print_table(
        ["uuid", "trial", "steps_completed", "size", "state", "created"],
        [
            [
                c.get("uuid"),
                c.get("trial_id"),
                c.get("steps_completed"),
                fmt_size(c.get("size")),
                c.get("state"),
                fmt_time(c.get("created_at")),
            ]
            for c in checkpoints
        ],
    )
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    """Stream the checkpoint's tar and extract it into ``-o DIR`` (default
    ``checkpoints/<uuid>``); print the directory.

    Extraction uses ``tarfile``'s ``"data"`` filter (PEP 706): absolute paths, ``..``, links
    leaving the directory and device files are refused, so a hostile archive cannot write
    outside DIR.
    """
    dest = Path(args.output or Path("checkpoints") / args.uuid)
    session = make_session(args)
    response = session.stream(f"checkpoints/{args.uuid}/download")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        # A proxy may gzip the body; let urllib3 undo that before tarfile reads it.
        response.raw.decode_content = True
        with tarfile.open(fileobj=response.raw, mode="r|") as archive:
            archive.extractall(dest, filter="data")
    except tarfile.TarError as exc:
        raise CLIError(f"checkpoint {args.uuid}: unsafe or corrupt archive: {exc}") from None
    except requests.RequestException as exc:
        raise CLIError(f"checkpoint {args.uuid}: download interrupted: {exc}") from None
    except OSError as exc:
        raise CLIError(f"cannot write checkpoint into {dest}: {exc}") from None
    finally:
        response.close()
    print(dest.resolve())
    return 0
