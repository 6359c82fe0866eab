"""RocketBox: Apache RocketMQ's architecture as a multi-process cluster in a box."""
