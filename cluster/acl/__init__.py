"""Access control: RocketMQ's plain_acl.yml accounts, checked on every door (``../shared/rocketmq-protocol.md`` §9).

Pure modules (no I/O): ``permissions`` (PUB/SUB/DENY words and bits), ``addresses`` (white address
patterns), ``model`` (the file's accounts), ``resources`` (what a request needs), ``signature``
(the remoting HMAC, the gRPC and HTTP authorization headers), ``decision`` (RocketMQ's order of
checks). With I/O: ``acl_file`` (loading and reloading the file), ``curve`` (ZeroMQ CURVE keys and
the ZAP handler of the native door), ``guard`` (the handler table's wrapper: refusals answered,
counted and logged).
"""
