"""The cluster's Prometheus endpoint: one exporter process per cluster (``procs/metrics.py``) that,
at each scrape, asks every broker for its numbers (GET_BROKER_METRICS, ``broker/metrics.py``) and
reads the supervisor's cluster.json, and answers in RocketMQ 5's metric names and labels."""
