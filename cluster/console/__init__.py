"""The web console (RocketMQ's rocketmq-dashboard, ``../shared/OPERATIONS.md`` §1.2): one process
per cluster (``procs/console.py``) serving server-rendered pages (Starlette + Jinja2 on uvicorn)
with a small script of our own for live refresh and charts (``static/console.js``).

Every action goes through the client library's ``Admin`` (the same calls as the ``cluster`` CLI);
the process list comes from the supervisor's ``cluster.json``. ``settings.py`` imports nothing of
the web libraries, so the topology can build a console's settings without loading them.
"""
