import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Inspect NAMESRV TOPIC: sends a plain message (keys, tag, a user property), one with delay level 1 and a
 * 5 KiB one, consumes them with a push consumer and prints every header field and property of each as
 * "got KIND name=value" lines (sorted), so two brokers' deliveries can be compared line by line.
 * Exit 0 iff all three arrived within 60 s.
 */
public class Inspect {
    public static void main(String[] args) {
        Exits.run(() -> inspect(args));
    }

    static int inspect(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer producer = new DefaultMQProducer("InspectPG");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        Message plain = new Message(topic, "TagA", run + "-plain", "plain body".getBytes());
        plain.putUserProperty("u", "1");
        Message delayed = new Message(topic, "TagA", run + "-delayed", "delayed body".getBytes());
        delayed.setDelayTimeLevel(1);
        Message big = new Message(topic, "TagA", run + "-big", new byte[5 * 1024]);
        for (Message m : new Message[] {plain, delayed, big}) {
            System.out.println("sent " + m.getKeys().substring(run.length() + 1) + " " + producer.send(m).getSendStatus());
        }
        producer.shutdown();

        Map<String, MessageExt> got = new ConcurrentHashMap<>();
        CountDownLatch all = new CountDownLatch(3);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("InspectCG" + run);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                String key = m.getKeys();
                if (key != null && key.startsWith(run + "-") && got.putIfAbsent(key.substring(run.length() + 1), m) == null) {
                    all.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean done = all.await(60, TimeUnit.SECONDS);
        consumer.shutdown();
        for (Map.Entry<String, MessageExt> e : new TreeMap<>(got).entrySet()) {
            MessageExt m = e.getValue();
            Map<String, String> fields = new TreeMap<>(m.getProperties());
            fields.put("@topic", m.getTopic());
            fields.put("@flag", Integer.toString(m.getFlag()));
            fields.put("@sysFlag", Integer.toString(m.getSysFlag()));
            fields.put("@bornHost", String.valueOf(m.getBornHost()));
            fields.put("@storeHost", String.valueOf(m.getStoreHost()));
            fields.put("@reconsumeTimes", Integer.toString(m.getReconsumeTimes()));
            fields.put("@bodyLength", Integer.toString(m.getBody().length));
            fields.put("@msgId", m.getMsgId());
            fields.put("@preparedTransactionOffset", Long.toString(m.getPreparedTransactionOffset()));
            for (Map.Entry<String, String> f : fields.entrySet()) {
                System.out.println("got " + e.getKey() + " " + f.getKey() + "=" + f.getValue());
            }
        }
        System.out.println("received " + got.size() + " of 3");
        return done ? 0 : 1;
    }
}
