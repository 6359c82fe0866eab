"""Which broker part serves each request code: data, read by ``BrokerService`` to build its dispatch
and by tests (tests/unit/test_protocol_table.py) without a broker.

A value names the handler as an attribute path on the service: ``"sender.on_send"`` is
``service.sender.on_send``, ``"on_heartbeat"`` the service's own. The codes refused on purpose, each
with its reason, are in ``cluster/refusals.py`` (``BROKER_REFUSALS``), never here.
"""

from __future__ import annotations

from rocketbox.cluster.protocol import RequestCode

BROKER_HANDLERS: dict[int, str] = {
    RequestCode.SEND_MESSAGE: "sender.on_send",
    RequestCode.SEND_MESSAGE_V2: "sender.on_send",
    RequestCode.SEND_BATCH_MESSAGE: "sender.on_send",
    RequestCode.PULL_MESSAGE: "puller.on_pull",
    RequestCode.POP_MESSAGE: "popper.on_pop",
    RequestCode.ACK_MESSAGE: "popper.on_ack",
    RequestCode.ACK_MESSAGES: "popper.on_ack_batch",
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: "popper.on_change_invisible_time",
    RequestCode.QUERY_CONSUMER_OFFSET: "offset_requests.on_query_consumer_offset",
    RequestCode.UPDATE_CONSUMER_OFFSET: "offset_requests.on_update_consumer_offset",
    RequestCode.GET_MAX_OFFSET: "offset_requests.on_get_max_offset",
    RequestCode.GET_MIN_OFFSET: "offset_requests.on_get_min_offset",
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: "offset_requests.on_search_offset_by_timestamp",
    RequestCode.HEART_BEAT: "on_heartbeat",
    RequestCode.UNREGISTER_CLIENT: "on_unregister_client",
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: "on_consumer_list",
    RequestCode.CONSUMER_SEND_MSG_BACK: "send_back.on_send_back",
    RequestCode.END_TRANSACTION: "transactions.on_end_transaction",
    RequestCode.RECALL_MESSAGE: "recaller.on_recall",
    RequestCode.LOCK_BATCH_MQ: "locks.on_lock_batch",
    RequestCode.UNLOCK_BATCH_MQ: "locks.on_unlock_batch",
    RequestCode.UPDATE_AND_CREATE_TOPIC: "topic_requests.on_update_topic",
    RequestCode.DELETE_TOPIC_IN_BROKER: "topic_requests.on_delete_topic",
    RequestCode.GET_ALL_TOPIC_CONFIG: "admin.on_all_topic_config",
    RequestCode.GET_TOPIC_CONFIG: "topic_requests.on_get_topic_config",
    RequestCode.GET_ALL_CONSUMER_OFFSET: "admin.on_all_consumer_offset",
    RequestCode.VIEW_MESSAGE_BY_ID: "queries.on_view_message",
    RequestCode.QUERY_MESSAGE: "queries.on_query_message",
    RequestCode.GET_EARLIEST_MSG_STORETIME: "queries.on_earliest_msg_store_time",
    RequestCode.CHECK_CLIENT_CONFIG: "client_config_check.on_check_client_config",
    RequestCode.SEND_REPLY_MESSAGE: "replies.on_send_reply",
    RequestCode.SEND_REPLY_MESSAGE_V2: "replies.on_send_reply",
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: "admin.on_query_topic_consume_by_who",
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: "reset_offsets.on_invoke_broker_to_reset_offset",
    RequestCode.GET_BROKER_RUNTIME_INFO: "on_runtime_info",
    RequestCode.GET_BROKER_CONFIG: "admin.on_broker_config",
    RequestCode.UPDATE_BROKER_CONFIG: "admin.on_update_broker_config",
    RequestCode.DELETE_EXPIRED_COMMITLOG: "admin.on_delete_expired_commitlog",
    RequestCode.GET_CONSUMER_CONNECTION_LIST: "admin.on_consumer_connection_list",
    RequestCode.GET_TOPIC_STATS_INFO: "admin.on_topic_stats",
    RequestCode.GET_CONSUME_STATS: "admin.on_consume_stats",
    RequestCode.GET_CONSUMER_RUNNING_INFO: "admin.on_consumer_running_info",
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: "admin.on_update_subscription_group",
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: "admin.on_all_subscription_groups",
    RequestCode.DELETE_SUBSCRIPTIONGROUP: "admin.on_delete_subscription_group",
    RequestCode.GET_BROKER_EPOCH_CACHE: "on_epoch_cache",
    RequestCode.GET_BROKER_METRICS: "metrics.on_metrics",
    RequestCode.VIEW_BROKER_STATS_DATA: "stats.on_view_stats",
    RequestCode.GET_BROKER_HA_STATUS: "ha.on_ha_status",
    RequestCode.CLEAN_UNUSED_TOPIC: "topic_requests.on_clean_unused_topic",
    RequestCode.GET_PRODUCER_CONNECTION_LIST: "client_admin.on_producer_connection_list",
    RequestCode.GET_ALL_PRODUCER_INFO: "client_admin.on_all_producer_info",
    RequestCode.CONSUME_MESSAGE_DIRECTLY: "client_admin.on_consume_message_directly",
    RequestCode.GET_BROKER_CONSUME_STATS: "store_admin.on_broker_consume_stats",
    RequestCode.QUERY_CONSUME_TIME_SPAN: "store_admin.on_query_consume_time_span",
    RequestCode.QUERY_CORRECTION_OFFSET: "store_admin.on_query_correction_offset",
    RequestCode.CLONE_GROUP_OFFSET: "store_admin.on_clone_group_offset",
    RequestCode.QUERY_CONSUME_QUEUE: "store_admin.on_query_consume_queue",
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: "store_admin.on_clean_expired_consume_queue",
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: "store_admin.on_system_topic_list",
    RequestCode.GET_ALL_DELAY_OFFSET: "store_admin.on_all_delay_offset",
    RequestCode.RESUME_CHECK_HALF_MESSAGE: "store_admin.on_resume_check_half_message",
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: "acl_admin.on_update_account",
    RequestCode.DELETE_ACL_CONFIG: "acl_admin.on_delete_account",
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: "acl_admin.on_update_global_white_addrs",
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: "acl_admin.on_acl_version",
    RequestCode.AUTH_CREATE_USER: "auth_admin.on_create_user",
    RequestCode.AUTH_UPDATE_USER: "auth_admin.on_update_user",
    RequestCode.AUTH_DELETE_USER: "auth_admin.on_delete_user",
    RequestCode.AUTH_GET_USER: "auth_admin.on_get_user",
    RequestCode.AUTH_LIST_USER: "auth_admin.on_list_user",
    RequestCode.AUTH_CREATE_ACL: "auth_admin.on_create_acl",
    RequestCode.AUTH_UPDATE_ACL: "auth_admin.on_update_acl",
    RequestCode.AUTH_DELETE_ACL: "auth_admin.on_delete_acl",
    RequestCode.AUTH_GET_ACL: "auth_admin.on_get_acl",
    RequestCode.AUTH_LIST_ACL: "auth_admin.on_list_acl",
}


def handler_of(service, path: str):
    """The bound handler a ``BROKER_HANDLERS`` value names on ``service``."""
    target = service
    for name in path.split("."):
        target = getattr(target, name)
    return target
