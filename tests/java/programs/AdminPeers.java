import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * AdminPeers NAMESRV TOPIC COUNT PRODUCER_GROUP CONSUMER_GROUP: the online peers mqadmin's verbs look at.
 * A DefaultMQProducer sends COUNT messages (tag TagA, keys "key-0".."key-N") and prints
 * "sent MSG_ID OFFSET_MSG_ID QUEUE_ID QUEUE_OFFSET" for each; a DefaultMQPushConsumer of CONSUMER_GROUP
 * then consumes the topic from its first offset. Once the consumer saw all COUNT it prints
 * "ready CLIENT_ID" and both stay online (heartbeats, answers to broker requests) until stdin closes or a
 * line "quit" comes. A message given again (consumeMessageDirectly, a reset offset) prints "again MSG_ID BODY".
 */
public class AdminPeers {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        DefaultMQProducer producer = new DefaultMQProducer(args[3]);
        producer.setNamesrvAddr(namesrv);
        // A send's whole budget (route, connection, retries): a JVM starting on a busy machine needs more than 3 s.
        producer.setSendMsgTimeout(15_000);
        producer.start();
        for (int i = 0; i < count; i++) {
            SendResult r = send(producer, new Message(topic, "TagA", "key-" + i, ("body-" + i).getBytes()));
            System.out.println("sent " + r.getMsgId() + " " + r.getOffsetMsgId() + " " + r.getMessageQueue().getQueueId()
                + " " + r.getQueueOffset());
        }
        Set<String> seen = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[4]);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                // UNIQ_KEY: what getMsgId() answers for a pulled message, not for one given directly.
                String id = m.getProperty("UNIQ_KEY") != null ? m.getProperty("UNIQ_KEY") : m.getMsgId();
                if (!seen.add(id)) {
                    System.out.println("again " + id + " " + new String(m.getBody()));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + 60_000;
        while (seen.size() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        System.out.println("consumed " + seen.size());
        System.out.println("ready " + consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        System.out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = stdin.readLine()) != null && !line.trim().equals("quit")) {
            System.out.flush();
        }
        consumer.shutdown();
        producer.shutdown();
        System.exit(seen.size() >= count ? 0 : 1);
    }

    /**
     * A send tried up to ten times: the Java client whose route lookup times out (a JVM starting on a busy
     * machine) takes the topic for a new one and sends by TBW102's route, to queues the topic lacks, until
     * its next route refresh.
     */
    static SendResult send(DefaultMQProducer producer, Message message) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return producer.send(message);
            } catch (Exception e) {
                if (attempt == 10) {
                    throw e;
                }
                System.out.println("retry " + attempt + " " + e);
                Thread.sleep(1000);
            }
        }
    }
}
