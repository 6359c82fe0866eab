import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * SendAndPush NAMESRV TOPIC COUNT BODY_BYTES: COUNT sync sends of BODY_BYTES each with a DefaultMQProducer,
 * then a DefaultMQPushConsumer from the first offset until every one arrived with its body intact.
 * Prints "sent i STATUS" per send and "received N of M" at the end; exit 0 iff all arrived.
 */
public class SendAndPush {
    public static void main(String[] args) {
        Exits.run(() -> sendAndPush(args));
    }

    static int sendAndPush(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]), size = Integer.parseInt(args[3]);
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer producer = new DefaultMQProducer("JavaSendPG");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        for (int i = 0; i < count; i++) {
            byte[] body = body(run, i, size);
            SendResult result = producer.send(new Message(topic, "TagA", run + "-" + i, body));
            System.out.println("sent " + i + " " + result.getSendStatus());
        }
        producer.shutdown();

        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(count);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("JavaPushCG" + run);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                String key = m.getKeys();
                if (key == null || !key.startsWith(run + "-")) {
                    continue;
                }
                int i = Integer.parseInt(key.substring(run.length() + 1));
                if (java.util.Arrays.equals(m.getBody(), body(run, i, size)) && seen.add(key)) {
                    all.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean done = all.await(60, TimeUnit.SECONDS);
        consumer.shutdown();
        System.out.println("received " + seen.size() + " of " + count);
        return done ? 0 : 1;
    }

    static byte[] body(String run, int i, int size) {
        byte[] body = new byte[size];
        byte[] head = (run + "-" + i + ":").getBytes();
        for (int j = 0; j < size; j++) {
            body[j] = j < head.length ? head[j] : (byte) ('a' + (j * 7 + i) % 26);
        }
        return body;
    }
}
