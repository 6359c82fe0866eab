"""A message group's sends reach the broker in the order the proxy took them (proxy/group_order.py),
also when a later send finds a lookup's cache filled while an earlier one has not yet resumed from
the round trip that filled it (the race a fresh-clone run once showed: a FIFO group's last in-flight
send stored before six earlier ones)."""

from __future__ import annotations

import asyncio

import pytest

from rocketbox.cluster.client.routes import normalize_endpoint
from rocketbox.cluster.proxy.brokers import BrokerGateway
from rocketbox.cluster.proxy.calls import Call
from rocketbox.cluster.proxy.group_order import GroupOrder
from rocketbox.cluster.proxy.producer_service import ProducerService
from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.testing import LocalCluster

TOPIC = "GroupOrderTopic"
CALL = Call("group-order-test", "127.0.0.1:1", None)


def _request(body: str, group: str) -> service.SendMessageRequest:
    system = pb.SystemProperties(message_id=f"ID-{body}", message_type=pb.FIFO, body_encoding=pb.IDENTITY,
                                 message_group=group)
    return service.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=TOPIC), body=body.encode(),
                                                           system_properties=system)])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("batched", [True, False], ids=["a-read-as-a-batch", "call-by-call"])
def test_a_later_send_that_finds_the_cache_filled_waits_for_its_group(tmp_path, batched):
    with LocalCluster(str(tmp_path / "c")) as cluster:
        from rocketbox.cluster.client.admin import Admin
        with Admin(cluster.namesrv) as admin:
            admin.create_topic(TOPIC, 2)

        async def main():
            settings = ProxySettings(namesrv_endpoints=tuple(normalize_endpoint(e) for e in cluster.namesrv.split(";")))
            gateway = BrokerGateway(settings)
            producer = ProducerService(settings, gateway, registry=None, transactions=None)

            async def send(bodies: list[str]) -> list:
                requests = [(CALL, _request(body, "G")) for body in bodies]
                if batched:
                    return await producer.send_batch(requests)
                return await asyncio.gather(*(producer.send_message(*call_request) for call_request in requests))

            try:
                await gateway.existing_route(TOPIC)      # warm: only the topic's config is looked up below
                await gateway.broker_table()
                later: list[asyncio.Task] = []
                fetch = gateway._fetch_topic_config

                async def fetch_then_take_more_sends(topic, route):
                    config = await fetch(topic, route)
                    # Taken now, these find the config cached before the first sends resume from this fetch.
                    later.append(asyncio.get_running_loop().create_task(send(["fifo-3", "fifo-4"])))
                    return config

                gateway._fetch_topic_config = fetch_then_take_more_sends
                first = await asyncio.wait_for(send(["fifo-1", "fifo-2"]), 20)
                second = await asyncio.wait_for(later[0], 20)
                answers = [*first, *second]
                assert all(a.status.code == Code.OK for a in answers), answers
                offsets = [a.entries[0].offset for a in answers]
                assert offsets == sorted(offsets) and len(set(offsets)) == 4, offsets
                assert producer.order.waiting_groups() == 0
            finally:
                gateway.close()

        asyncio.run(main())


def test_a_send_that_gives_up_before_its_turn_still_holds_the_line():
    async def main():
        order = GroupOrder()
        first, second, third = (order.turn("T", "G") for _ in range(3))
        other = order.turn("T", "H")
        await asyncio.wait_for(other.wait(), 1)   # another group's line is its own
        second.release()                            # refused before it could write
        waiting = asyncio.ensure_future(third.wait())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not waiting.done()                   # the first has not written yet
        first.release()
        await asyncio.wait_for(waiting, 1)
        third.release()
        other.release()
        assert order.waiting_groups() == 0
        assert order.turn("T", "") is None          # a send of no group takes no turn

    asyncio.run(main())
