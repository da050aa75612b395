"""``headway webhook create|list|describe|delete|test``: the admins' webhooks (docs/webhooks.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from headway.cli._common import make_api
from headway.cli._output import print_json, print_table

if TYPE_CHECKING:  # the wire models load on first use (the CLI's start stays fast)
    from headway.client._wire_webhooks import WebhookDelivery

EVENTS = (
    "experiment.state_changed",
    "trial.state_changed",
    "checkpoint.completed",
    "model_version.created",
    "model_alias.moved",
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``webhook create | list | describe | delete | test`` to the ``headway`` parser."""
    webhook = commands.add_parser("webhook", help="admins: POST registry events to URLs")
    cmds = webhook.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    create = cmds.add_parser("create", help="register URL for events; prints its secret once")
    create.add_argument("name", metavar="NAME")
    create.add_argument("url", metavar="URL")
    create.add_argument(
        "--event",
        "-e",
        action="append",
        required=True,
        dest="events",
        help=f"an event type (repeatable): {', '.join(EVENTS)}",
    )
    create.add_argument("--format", choices=("default", "slack"), default="default")
    create.add_argument("--secret", help="16-128 characters (default: drawn by the master)")
    create.add_argument(
        "--workspace",
        "-w",
        metavar="NAME",
        help="only this workspace's events (default: every workspace's)",
    )
    create.set_defaults(func=cmd_create)
    listing = cmds.add_parser("list", help="every webhook and its last delivery")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_list)
    describe = cmds.add_parser("describe", help="a webhook and its recent deliveries")
    describe.add_argument("id", metavar="ID", type=int)
    describe.add_argument("--limit", type=int, default=20, help="deliveries shown (default 20)")
    describe.add_argument("--json", action="store_true", help="print raw JSON")
    describe.set_defaults(func=cmd_describe)
    delete = cmds.add_parser("delete", help="delete a webhook and its deliveries")
    delete.add_argument("id", metavar="ID", type=int)
    delete.set_defaults(func=cmd_delete)
    test = cmds.add_parser("test", help="send a test event now and show the outcome")
    test.add_argument("id", metavar="ID", type=int)
    test.set_defaults(func=cmd_test)


def cmd_create(args: argparse.Namespace) -> int:
    """Print the webhook's id, then its secret alone on stdout (shown only now)."""
    created = make_api(args).webhook_create(
        name=args.name,
        url=args.url,
        events=args.events,
        format=args.format,
        secret=args.secret,
        workspace=args.workspace,
    )
    print(
        f"created webhook {created.id} ({created.name}); its signing secret is shown only now:",
        file=sys.stderr,
    )
    print(created.secret)
    return 0


def _last(delivery: WebhookDelivery | None) -> str | None:
    if delivery is None:
        return None
    status = delivery.last_status_code
    return f"{delivery.state} ({status})" if status else delivery.state


def cmd_list(args: argparse.Namespace) -> int:
    """One row per webhook: id, name, URL, workspace, format, events, enabled, last delivery."""
    hooks = make_api(args).webhook_list()
    if args.json:
        print_json([hook.model_dump(mode="json") for hook in hooks])
        return 0
    print_table(
        ["id", "name", "url", "workspace", "format", "events", "enabled", "last delivery"],
        [
            [
                h.id,
                h.name,
                h.url,
                h.workspace or "(all)",
                h.format,
                ",".join(h.events),
                h.enabled,
                _last(h.last_delivery),
            ]
            for h in hooks
        ],
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """The webhook's fields, then its recent deliveries, newest first."""
    api = make_api(args)
    hook = api.webhook_get(args.id)
    deliveries = api.webhook_deliveries(args.id, limit=args.limit)
    if args.json:
        dump = hook.model_dump(mode="json")
        print_json(dump | {"deliveries": [d.model_dump(mode="json") for d in deliveries]})
        return 0
    print(f"webhook {hook.id}: {hook.name}")
    print(f"  url:       {hook.url}")
    print(f"  workspace: {hook.workspace or '(all)'}")
    print(f"  format:    {hook.format}")
    print(f"  events:    {', '.join(hook.events)}")
    print(f"  enabled:   {hook.enabled}")
    print_table(
        ["delivery", "event", "type", "state", "attempts", "status", "last attempt", "error"],
        [
            [
                d.id,
                d.event_id,
                d.event_type,
                d.state,
                d.attempts,
                d.last_status_code,
                f"{d.last_attempt_at:%Y-%m-%d %H:%M:%S}" if d.last_attempt_at else None,
                d.last_error[:60] or None,
            ]
            for d in deliveries
        ],
    )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete the webhook."""
    make_api(args).webhook_delete(args.id)
    print(f"deleted webhook {args.id}")
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    """Send a test event; exit 1 when the receiver did not answer 2xx (it is retried)."""
    delivery = make_api(args).webhook_test(args.id)
    status = delivery.last_status_code
    if delivery.state == "DELIVERED":
        print(f"delivered event {delivery.event_id} (HTTP {status})")
        return 0
    print(
        f"not delivered ({delivery.last_error or delivery.state}); state {delivery.state}, "
        f"attempt {delivery.attempts}",
        file=sys.stderr,
    )
    return 1
