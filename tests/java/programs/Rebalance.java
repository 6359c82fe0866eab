import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Rebalance NAMESRV TOPIC COUNT: two push consumers of one group (instances A and B) share the topic's
 * queues; once each holds some (the broker's NOTIFY_CONSUMER_IDS_CHANGED and the group's member list),
 * COUNT messages are sent and both must receive theirs; then B leaves and COUNT more must all reach A.
 * Prints "split A=n B=m" (queues held), "round 1 A=x B=y of COUNT", "round 2 A=z of COUNT"; exit 0 iff
 * every message arrived (at least once) in each round within 60 s.
 */
public class Rebalance {
    public static void main(String[] args) {
        Exits.run(() -> rebalance(args));
    }

    static int rebalance(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer producer = new DefaultMQProducer("RebalancePG");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        producer.send(new Message(topic, "warm-up".getBytes()));   // the topic exists before the group subscribes

        String group = "RebalanceCG" + run;
        Map<String, Set<String>> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer a = member(namesrv, topic, group, "A", run, got);
        DefaultMQPushConsumer b = member(namesrv, topic, group, "B", run, got);
        a.start();
        b.start();
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline && (held(a) == 0 || held(b) == 0)) {
            TimeUnit.MILLISECONDS.sleep(200);
        }
        System.out.println("split A=" + held(a) + " B=" + held(b));
        for (int i = 0; i < count; i++) {
            producer.send(new Message(topic, "T", run + "-1-" + i, "round 1".getBytes()));
        }
        boolean first = waitFor(got, run + "-1-", count, deadline);
        System.out.println("round 1 A=" + countOf(got, "A", run + "-1-") + " B=" + countOf(got, "B", run + "-1-")
            + " of " + count);
        b.shutdown();
        long deadline2 = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline2 && held(a) < a.fetchSubscribeMessageQueues(topic).size()) {
            TimeUnit.MILLISECONDS.sleep(200);
        }
        for (int i = 0; i < count; i++) {
            producer.send(new Message(topic, "T", run + "-2-" + i, "round 2".getBytes()));
        }
        boolean second = waitFor(got, run + "-2-", count, deadline2);
        System.out.println("round 2 A=" + countOf(got, "A", run + "-2-") + " of " + count);
        a.shutdown();
        producer.shutdown();
        return first && second ? 0 : 1;
    }

    static DefaultMQPushConsumer member(String namesrv, String topic, String group, String name, String run,
                                        Map<String, Set<String>> got) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(name + run);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        consumer.subscribe(topic, "*");
        Set<String> mine = got.computeIfAbsent(name, k -> ConcurrentHashMap.newKeySet());
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                if (m.getKeys() != null && m.getKeys().startsWith(run + "-")) {
                    mine.add(m.getKeys());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return consumer;
    }

    static int held(DefaultMQPushConsumer consumer) {
        Map<MessageQueue, ?> table = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        return table.size();
    }

    static long countOf(Map<String, Set<String>> got, String name, String prefix) {
        return got.getOrDefault(name, Set.of()).stream().filter(k -> k.startsWith(prefix)).count();
    }

    static boolean waitFor(Map<String, Set<String>> got, String prefix, int count, long deadline)
            throws InterruptedException {
        while (System.currentTimeMillis() < deadline) {
            Set<String> all = ConcurrentHashMap.newKeySet();
            for (Set<String> s : got.values()) {
                s.stream().filter(k -> k.startsWith(prefix)).forEach(all::add);
            }
            if (all.size() == count) {
                return true;
            }
            TimeUnit.MILLISECONDS.sleep(200);
        }
        return false;
    }
}
