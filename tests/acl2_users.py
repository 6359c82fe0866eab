"""The ACL 2.0 set-up the real-client tests share: topics, a user allowed PUB and SUB on one topic
and group and denied everything on another, and a user with no policy, made with the `cluster` verbs
as a user would (mqadmin's createUser / createAcl)."""

from __future__ import annotations

from rocketbox.cluster.client.admin import Admin
from tests.cli_helpers import run_cli


def create_users_and_acls(cluster, *, topic: str, closed: str, group: str, user: tuple[str, str],
                          unpermitted: tuple[str, ...]) -> None:
    """``user`` (name, password) gets Pub,Sub on ``topic`` and ``group`` and a Deny of All on
    ``closed``; ``unpermitted`` is createUser's arguments for a user no policy names."""
    admin = Admin(config=cluster.client_config())
    for name in (topic, closed):
        admin.create_topic(name, 2)
    admin.shutdown()
    name, password = user
    for args in (("createUser", "-u", name, "-p", password),
                 ("createAcl", "-s", f"User:{name}", "-r", f"Topic:{topic},Group:{group}", "-a", "Pub,Sub",
                  "-d", "Allow"),
                 ("createAcl", "-s", f"User:{name}", "-r", f"Topic:{closed}", "-a", "All", "-d", "Deny"),
                 ("createUser", *unpermitted)):
        run_cli(*args, data_dir=cluster.data_dir, namesrv=cluster.namesrv)
