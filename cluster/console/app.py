"""The console's routes: one Starlette application, pages rendered on the server from Jinja2
templates; JSON for the live parts (``static/console.js`` refreshes fragments and draws charts)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rocketbox.cluster.client.message import Message
from rocketbox.cluster.console import cluster_view, dead_letters, groups, messages, topics
from rocketbox.cluster.console.context import ConsoleContext
from rocketbox.cluster.console.forms import FormError, text_field
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

    def topics_page(request, form, notice=None):
        kind = text_field(form, "kind", max_len=20) if request.method == "GET" else ""
        return {"title": "Topics", "kinds": topics.KINDS, "kind": kind, "rows": topics.topic_rows(admin, kind),
                "message_types": MESSAGE_TYPES, "perms": topics.PERMS, "notice": notice}

    def topic_save(request, form):
        fields = topics.topic_form(form)
        admin.create_topic(fields["topic"], fields["queue_count"], perm=fields["perm"],
                           message_type=fields["message_type"])
        kind = f", message type {fields['message_type']}" if fields["message_type"] else ""
        return topics_page(request, {}, f"topic {fields['topic']} saved: {fields['queue_count']} write queues "
                                        f"per broker{kind}")

    def topic_page(request, form, notice=None, sent=None):
        topic = request.path_params["topic"]
        if request.query_params.get("fragment") == "1":   # the live refresh needs only the queues
            return topic_queues_api(request)
        detail = topics.topic_detail(admin, topic, context.rates)
        if not detail["configs"] and not detail["queues"]:
            raise NoRouteError(f"topic {topic} does not exist")
        return {"title": f"Topic {topic}", "refresh_ms": REFRESH_MS, "notice": notice, "sent": sent,
                "message_types": MESSAGE_TYPES, "perms": topics.PERMS, **detail}

    def topic_queues_api(request):
        topic = request.path_params["topic"]
        rows = admin.queue_offsets(topic)
        context.rates.observe(rows)
        return {"topic": topic, "queues": rows}

    def topic_delete(request, form):
        topic = request.path_params["topic"]
        if text_field(form, "confirm") != topic:
            raise FormError(f"type the topic's name ({topic}) to confirm its deletion")
        admin.delete_topic(topic)
        return topics_page(request, {}, f"topic {topic} deleted")

    def topic_send(request, form):
        fields = topics.send_form({**form, "topic": request.path_params["topic"]})
        admin.route(fields["topic"])   # NoRouteError: no test message creates a topic by accident
        result = context.producer().send(Message(fields["topic"], fields["body"], tags=fields["tags"],
                                                 keys=fields["keys"]))
        sent = {"status": result.status.name, "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id,
                "broker": result.queue.broker_name, "queueId": result.queue.queue_id,
                "queueOffset": result.queue_offset}
        return topic_page(request, {}, sent=sent)

    def groups_page(request, form):
        return {"title": "Consumer groups", "rows": groups.group_rows(admin)}

    def group_page(request, form, notice=None, reset=None):
        detail = groups.group_detail(admin, request.path_params["group"])
        if detail["config"] is None and not detail["queues"] and not detail["online"]:
            raise NoRouteError(f"consumer group {detail['group']} does not exist")
        return {"title": f"Group {detail['group']}", "refresh_ms": REFRESH_MS, "notice": notice, "reset": reset,
                **detail}

    def group_reset(request, form):
        group = request.path_params["group"]
        fields = groups.reset_form(form)
        offsets = admin.reset_offset_by_time(fields["topic"], group, fields["timestamp_ms"])
        rows = [{"broker": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
                for mq, offset in sorted(offsets.items())]
        what = "the end (accumulation skipped)" if fields["timestamp_ms"] < 0 else "the chosen time"
        return group_page(request, {}, f"{group}'s offsets of {fields['topic']} moved to {what} on "
                                       f"{len(rows)} queues", rows)

    def messages_page(request, form):
        asked = request.query_params.get("by")
        what, found = messages.lookup(admin, form) if asked else ("", [])
        return {"title": "Messages", "asked": bool(asked), "what": what,
                "rows": [messages.message_row(m) for m in found], "form": dict(form)}

    def message_page(request, form):
        detail = messages.message_detail(admin, request.path_params["msg_id"])
        return {"title": f"Message {detail['msgId']}", **detail}

    def dlq_page(request, form, notice=None, resent=None):
        group = text_field(form, "group", max_len=127) if request.method == "GET" else request.path_params["group"]
        rows = dead_letters.dead_letter_rows(admin, group) if group else []
        return {"title": "Dead letters", "group": group, "rows": rows, "notice": notice, "resent": resent,
                "groups": sorted(admin.consumer_groups())}

    def dlq_resend(request, form):
        group = request.path_params["group"]
        rows = dead_letters.resend(admin, group, form)
        done = sum(r["status"] == "RESENT" for r in rows)
        return dlq_page(request, {}, f"{done} resent, {len(rows) - done} not", rows)

    def charts_page(request, form):
        return {"title": "Throughput", "refresh_ms": REFRESH_MS, "window_s": context.settings.chart_window_s}

    routes = [
        Route("/", lambda request: RedirectResponse("/cluster", status_code=303)),
        Route("/cluster", pages.page("cluster.html", cluster_page, nav="cluster")),
        Route("/api/cluster", pages.api(lambda request: cluster_page(request, {}))),
        Route("/topics", pages.page("topics.html", topics_page, nav="topics")),
        Route("/topics", pages.page("topics.html", topic_save, nav="topics"), methods=["POST"]),
        Route("/topics/{topic}", pages.page("topic.html", topic_page, nav="topics")),
        Route("/topics/{topic}/delete", pages.page("topics.html", topic_delete, nav="topics"), methods=["POST"]),
        Route("/topics/{topic}/send", pages.page("topic.html", topic_send, nav="topics"), methods=["POST"]),
        Route("/api/topics/{topic}/queues", pages.api(topic_queues_api)),
        Route("/groups", pages.page("groups.html", groups_page, nav="groups")),
        Route("/groups/{group}", pages.page("group.html", group_page, nav="groups")),
        Route("/groups/{group}/reset", pages.page("group.html", group_reset, nav="groups"), methods=["POST"]),
        Route("/messages", pages.page("messages.html", messages_page, nav="messages")),
        Route("/messages/{msg_id}", pages.page("message.html", message_page, nav="messages")),
        Route("/dlq", pages.page("dlq.html", dlq_page, nav="dlq")),
        Route("/dlq/{group}/resend", pages.page("dlq.html", dlq_resend, nav="dlq"), methods=["POST"]),
        Route("/charts", pages.page("charts.html", charts_page, nav="charts")),
        Route("/api/throughput", pages.api(lambda request: context.history.series())),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]

    async def not_found(request, exc):
        return pages.error_page(request, NoRouteError(f"no page at {request.url.path}"))

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
