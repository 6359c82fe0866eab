"""RocketMQ 5's proxy in cluster mode: ``apache.rocketmq.v2.MessagingService`` over gRPC, served
from the brokers through the cluster's own client library (never by importing the broker).

Only ``protos.py`` imports the generated protocol modules (they load rocketmq-python-client's whole
package); ``settings.py`` imports nothing of them, so the topology can build a proxy's settings
without that cost.
"""
