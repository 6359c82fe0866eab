"""The systems users would pick instead of ours, measured the same way in the same run (``python -m rocketbox.perf --compare``).

    base.py             what a peer provides (server start/stop, a client doing five things) and the
                        measures run on each, the same as ours
    redis_streams.py    Redis Streams: Debian ``redis-server``, redis-py (hiredis), pipelining, consumer groups
    nats_jetstream.py   NATS JetStream: Debian ``nats-server -js``, nats-py, acks in flight, pull consumers
    apache_rocketmq.py  Apache RocketMQ 4.9.8 built from source at ``$ROCKETBOX_APACHE_ROCKETMQ`` or ``../apache``:
                        a row of the door table (perf/door_rows.py), driven by the C++ client as
                        RocketBox's remoting row

``make peers`` installs the servers (apt) and the clients (the ``peers`` extra). A peer that is
not installed is reported as such; ours is measured regardless.
"""

from rocketbox.perf.peers.apache_rocketmq import ApacheRocketMQ
from rocketbox.perf.peers.nats_jetstream import NatsJetStream
from rocketbox.perf.peers.redis_streams import RedisStreams

PEERS = {peer.name: peer for peer in (RedisStreams, NatsJetStream)}
DOOR_PEERS = {ApacheRocketMQ.name: ApacheRocketMQ}
