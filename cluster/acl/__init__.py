"""Access control: RocketMQ's plain_acl.yml accounts, checked on every door (``../shared/rocketmq-protocol.md`` §9).

Pure modules (no I/O): ``permissions`` (PUB/SUB/DENY words and bits), ``addresses`` (white address
patterns), ``model`` (the file's accounts), ``resources`` (what a request needs), ``signature``
(the remoting HMAC, the gRPC and HTTP authorization headers), ``decision`` (RocketMQ's order of
checks). With I/O: ``acl_file`` (loading and reloading the file), ``curve`` (ZeroMQ CURVE keys and
the ZAP handler of the native door), ``guard`` (the handler table's wrapper: refusals answered,
counted and logged).
"""


def accounts_if(required: bool, acl_file: str):
    """The accounts an HTTP door checks requests against (``acl_file.AclFile``), or None when it asks
    for no credentials: the ACL model and its parsers load only for a door that checks (~8 ms of the
    web process's start)."""
    if not required:
        return None
    from rocketbox.cluster.acl.acl_file import AclFile
    return AclFile(acl_file)
