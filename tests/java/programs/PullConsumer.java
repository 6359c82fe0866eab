import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * PullConsumer NAMESRV TOPIC COUNT: COUNT sends, then a DefaultMQPullConsumer reads every queue of the
 * topic from offset 0 (pullBlockIfNotFound, 32 at a time) until it has seen them all, storing each
 * queue's offset (updateConsumeOffset and persist, then fetchConsumeOffset from the broker in a new
 * consumer of the group). Prints "pulled N of COUNT" and "offsets ok|wrong"; exit 0 iff all arrived within 60 s and
 * the offsets came back.
 */
public class PullConsumer {
    public static void main(String[] args) {
        Exits.run(() -> pull(args));
    }

    static int pull(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer producer = new DefaultMQProducer("PullPG");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        for (int i = 0; i < count; i++) {
            producer.send(new Message(topic, "TagA", run + "-" + i, ("pull " + i).getBytes()));
        }
        producer.shutdown();

        String group = "PullCG" + run;
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.start();
        Set<MessageQueue> queues = consumer.fetchSubscribeMessageQueues(topic);
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + 60_000;
        java.util.Map<MessageQueue, Long> next = new java.util.HashMap<>();
        while (seen.size() < count && System.currentTimeMillis() < deadline) {
            for (MessageQueue mq : queues) {
                long offset = next.getOrDefault(mq, 0L);
                PullResult result = consumer.pullBlockIfNotFound(mq, "*", offset, 32);
                if (result.getPullStatus() == PullStatus.FOUND) {
                    for (MessageExt m : result.getMsgFoundList()) {
                        if (m.getKeys() != null && m.getKeys().startsWith(run + "-")) {
                            seen.add(m.getKeys());
                        }
                    }
                }
                next.put(mq, result.getNextBeginOffset());
                consumer.updateConsumeOffset(mq, result.getNextBeginOffset());
            }
        }
        System.out.println("pulled " + seen.size() + " of " + count);
        for (MessageQueue mq : queues) {
            consumer.persist(mq);   // UPDATE_CONSUMER_OFFSET, one-way
        }
        consumer.shutdown();

        DefaultMQPullConsumer again = new DefaultMQPullConsumer(group);
        again.setNamesrvAddr(namesrv);
        again.setInstanceName("again" + run);
        again.start();
        boolean offsetsOk = true;
        for (MessageQueue mq : queues) {
            long stored = again.fetchConsumeOffset(mq, true);
            if (stored != next.getOrDefault(mq, 0L)) {
                System.out.println("offset of " + mq + ": " + stored + ", expected " + next.get(mq));
                offsetsOk = false;
            }
        }
        again.shutdown();
        System.out.println("offsets " + (offsetsOk ? "ok" : "wrong"));
        return seen.size() == count && offsetsOk ? 0 : 1;
    }
}
