"""The dead letters page's data: a group's %DLQ% messages, whether each was resent, and resends."""

from __future__ import annotations

from rocketbox.cluster.console.forms import FormError, text_field
from rocketbox.cluster.console.messages import message_row
from rocketbox.cluster.message.properties import PROPERTY_RETRY_TOPIC

LIST_MAX = 500


def dead_letter_rows(admin, group: str) -> list[dict]:
    return [{**message_row(m), "originTopic": m.properties.get(PROPERTY_RETRY_TOPIC, ""),
             "resent": admin.dead_letter_resent(m), "preview": m.body[:80].decode("utf-8", "replace")}
            for m in admin.dead_letters(group, LIST_MAX)]


def resend(admin, group: str, form) -> list[dict]:
    """Resend one dead letter (``msg_id``) or all of them (``all``); ``force`` resends a letter
    already resent. The rows the Admin returns: RESENT, ALREADY_RESENT or NO_ORIGIN_TOPIC."""
    force = bool(form.get("force"))
    if form.get("all"):
        return admin.resend_dead_letters(group, None, force=force)
    msg_id = text_field(form, "msg_id", required=True, max_len=64)
    rows = admin.resend_dead_letters(group, [msg_id], force=force)
    if not rows:
        raise FormError(f"group {group} has no dead letter {msg_id}")
    return rows
