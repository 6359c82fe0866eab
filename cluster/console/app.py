"""The console's routes: one Starlette application, pages rendered on the server from Jinja2
templates; JSON for the live parts (``static/console.js`` refreshes fragments and draws charts).
Every form that changes something is POST/redirect/GET: its handler returns the page to show and
what the action did (``web.Pages.action``), so reloading that page repeats nothing."""

from __future__ import annotations

from urllib.parse import quote

from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rocketbox.cluster.client.message import Message
from rocketbox.cluster.console import access, cluster_view, dead_letters, groups, messages, topics
from rocketbox.cluster.console.context import ConsoleContext
from rocketbox.cluster.console.forms import FormError, choice, text_field
from rocketbox.cluster.console.web import STATIC_DIR, Pages
from rocketbox.cluster.errors import NoRouteError
from rocketbox.cluster.topic_attributes import MESSAGE_TYPES

REFRESH_MS = 2_000


def build_app(context: ConsoleContext) -> Starlette:
    pages = Pages(context)
    admin = context.admin

    def cluster_page(request, form):
        return {"title": "Cluster", "refresh_ms": REFRESH_MS,
                **cluster_view.cluster_page(admin, context.settings.state_path)}

    def topics_page(request, form):
        kind = text_field(form, "kind", max_len=20)
        name_filter = text_field(form, "q", max_len=127)
        return {"title": "Topics", "kinds": topics.KINDS, "kind": kind, "q": name_filter,
                "rows": topics.topic_rows(admin, kind, name_filter), "message_types": MESSAGE_TYPES,
                "perms": topics.PERMS}

    def topic_save(request, form):
        fields = topics.topic_form(form)
        admin.create_topic(fields["topic"], fields["queue_count"], perm=fields["perm"],
                           message_type=fields["message_type"])
        kind = f", message type {fields['message_type']}" if fields["message_type"] else ""
        return "/topics", {"notice": f"topic {fields['topic']} saved: {fields['queue_count']} write queues "
                                     f"per broker{kind}"}

    def topic_page(request, form):
        topic = request.path_params["topic"]
        if request.query_params.get("fragment") == "1":   # the live refresh needs only the queues
            return topic_queues_api(request)
        detail = topics.topic_detail(admin, topic, context.rates)
        if not detail["configs"] and not detail["queues"]:
            raise NoRouteError(f"topic {topic} does not exist")
        return {"title": f"Topic {topic}", "refresh_ms": REFRESH_MS, "message_types": MESSAGE_TYPES,
                "perms": topics.PERMS, **detail}

    def topic_queues_api(request):
        topic = request.path_params["topic"]
        return {"topic": topic, "queues": topics.queue_rows(admin, topic, context.rates)}

    def topic_delete(request, form):
        topic = request.path_params["topic"]
        if text_field(form, "confirm") != topic:
            raise FormError(f"type the topic's name ({topic}) to confirm its deletion")
        admin.delete_topic(topic)
        return "/topics", {"notice": f"topic {topic} deleted"}

    def topic_send(request, form):
        fields = topics.send_form({**form, "topic": request.path_params["topic"]})
        admin.route(fields["topic"])   # NoRouteError: no test message creates a topic by accident
        result = context.producer().send(Message(fields["topic"], fields["body"], tags=fields["tags"],
                                                 keys=fields["keys"]))
        sent = {"status": result.status.name, "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id,
                "broker": result.queue.broker_name, "queueId": result.queue.queue_id,
                "queueOffset": result.queue_offset}
        return f"/topics/{quote(fields['topic'], safe='')}", {"sent": sent}

    def groups_page(request, form):
        show_system = form.get("system") == "1"
        name_filter = text_field(form, "q", max_len=127)
        sort = choice(form, "sort", groups.SORTS, default="lag")
        rows, hidden = groups.group_rows(admin, show_system=show_system, name_filter=name_filter)
        return {"title": "Consumer groups", "rows": groups.sorted_rows(rows, sort), "hidden": hidden,
                "system": show_system, "q": name_filter, "sort": sort, "sorts": groups.SORTS}

    def group_page(request, form):
        group = request.path_params["group"]
        detail = groups.group_detail(admin, group)
        if detail["config"] is None and not detail["queues"] and not detail["online"]:
            raise NoRouteError(f"there is no consumer group {group}: no broker has its subscription config, "
                               f"committed offsets or a member online")
        return {"title": f"Group {group}", "refresh_ms": REFRESH_MS, **detail}

    def group_reset(request, form):
        group = request.path_params["group"]
        fields = groups.reset_form(form)
        offsets = admin.reset_offset_by_time(fields["topic"], group, fields["timestamp_ms"])
        rows = [{"broker": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
                for mq, offset in sorted(offsets.items())]
        what = "the end (accumulation skipped)" if fields["timestamp_ms"] < 0 else "the chosen time"
        return f"/groups/{quote(group, safe='')}", {"notice": f"{group}'s offsets of {fields['topic']} moved to {what} on "
                                                     f"{len(rows)} queues", "reset": rows}

    def messages_page(request, form):
        asked = request.query_params.get("by")
        what, found = messages.lookup(admin, form) if asked else ("", [])
        return {"title": "Messages", "asked": bool(asked), "what": what, "topics": messages.topic_choices(admin),
                "rows": [messages.message_row(m) for m in found], "form": dict(form)}

    def message_page(request, form):
        topic = text_field(form, "topic", max_len=127) or None
        detail = messages.message_detail(admin, request.path_params["msg_id"], topic)
        return {"title": f"Message {detail['msgId']}", **detail}

    def dlq_page(request, form):
        group = text_field(form, "group", max_len=127)
        rows = dead_letters.dead_letter_rows(admin, group) if group else []
        return {"title": "Dead letters", "group": group, "rows": rows, "groups": sorted(admin.consumer_groups())}

    def dlq_resend(request, form):
        group = request.path_params["group"]
        rows = dead_letters.resend(admin, group, form)
        done = sum(r["status"] == "RESENT" for r in rows)
        return f"/dlq?group={quote(group, safe='')}", {"notice": f"{done} resent, {len(rows) - done} not", "resent": rows}

    def access_page(request, form):
        return {"title": "Access (ACL 2.0)", **access.access_page(admin)}

    def access_edit(edit):
        return lambda request, form: ("/access", {"notice": edit(request, form)})

    def charts_page(request, form):
        return {"title": "Throughput", "refresh_ms": REFRESH_MS, "window_s": context.settings.chart_window_s}

    routes = [
        Route("/", lambda request: RedirectResponse("/cluster", status_code=303)),
        Route("/cluster", pages.page("cluster.html", cluster_page, nav="cluster")),
        Route("/api/cluster", pages.api(lambda request: cluster_page(request, {}))),
        Route("/topics", pages.page("topics.html", topics_page, nav="topics")),
        Route("/topics", pages.action(topic_save, nav="topics"), methods=["POST"]),
        Route("/topics/{topic}", pages.page("topic.html", topic_page, nav="topics")),
        Route("/topics/{topic}/delete", pages.action(topic_delete, nav="topics"), methods=["POST"]),
        Route("/topics/{topic}/send", pages.action(topic_send, nav="topics"), methods=["POST"]),
        Route("/api/topics/{topic}/queues", pages.api(topic_queues_api)),
        Route("/groups", pages.page("groups.html", groups_page, nav="groups")),
        Route("/groups/{group}", pages.page("group.html", group_page, nav="groups")),
        Route("/groups/{group}/reset", pages.action(group_reset, nav="groups"), methods=["POST"]),
        Route("/messages", pages.page("messages.html", messages_page, nav="messages")),
        Route("/messages/{msg_id}", pages.page("message.html", message_page, nav="messages")),
        Route("/dlq", pages.page("dlq.html", dlq_page, nav="dlq")),
        Route("/dlq/{group}/resend", pages.action(dlq_resend, nav="dlq"), methods=["POST"]),
        Route("/charts", pages.page("charts.html", charts_page, nav="charts")),
        Route("/access", pages.page("access.html", access_page, nav="access")),
        Route("/access/users", pages.action(access_edit(lambda r, f: access.create_user(admin, f)), nav="access"),
              methods=["POST"]),
        Route("/access/users/{user}/delete", pages.action(access_edit(
            lambda r, f: access.delete_user(admin, r.path_params["user"])), nav="access"), methods=["POST"]),
        Route("/access/acls", pages.action(access_edit(lambda r, f: access.put_acl_entry(admin, f)), nav="access"),
              methods=["POST"]),
        Route("/access/acls/delete", pages.action(access_edit(lambda r, f: access.delete_acl_entry(admin, f)),
                                                  nav="access"), methods=["POST"]),
        Route("/api/throughput", pages.api(lambda request: context.history.series())),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]

    async def not_found(request, exc):
        return pages.error_page(request, NoRouteError(f"no page at {request.url.path}"))

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
