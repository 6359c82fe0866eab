import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * SqlFilter NAMESRV TOPIC: ten messages with the user property a = 0..9 (tags TagA for even a, TagB
 * for odd), then two push consumers from the first offset in fresh groups: MessageSelector.bySql("a
 * BETWEEN 3 AND 5") (CHECK_CLIENT_CONFIG at start; its pulls carry no expression: the broker uses the
 * heartbeat's) and a tag subscription "TagB". Prints "sql a=..." and "tag a=..." as they arrive and
 * "sql got [..]" / "tag got [..]"; exit 0 iff the SQL consumer got exactly 3, 4, 5 and the tag one
 * exactly the odd values within 40 s (and nothing else 3 s later).
 */
public class SqlFilter {
    public static void main(String[] args) {
        Exits.run(() -> filter(args));
    }

    static int filter(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer producer = new DefaultMQProducer("SqlFilterPG");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        for (int a = 0; a < 10; a++) {
            Message m = new Message(topic, a % 2 == 0 ? "TagA" : "TagB", run + "-" + a, ("a=" + a).getBytes());
            m.putUserProperty("a", Integer.toString(a));
            m.putUserProperty("run", run);
            producer.send(m);
        }
        producer.shutdown();
        Set<Integer> sql = new ConcurrentSkipListSet<>();
        Set<Integer> tag = new ConcurrentSkipListSet<>();
        DefaultMQPushConsumer bySql = consumer(namesrv, "SqlCG" + run, run, sql, "sql");
        bySql.subscribe(topic, MessageSelector.bySql("a BETWEEN 3 AND 5"));
        DefaultMQPushConsumer byTag = consumer(namesrv, "TagCG" + run, run, tag, "tag");
        byTag.subscribe(topic, "TagB");
        bySql.start();
        byTag.start();
        Set<Integer> wantSql = new TreeSet<>(java.util.Arrays.asList(3, 4, 5));
        Set<Integer> wantTag = new TreeSet<>(java.util.Arrays.asList(1, 3, 5, 7, 9));
        long deadline = System.currentTimeMillis() + 40_000;
        while (System.currentTimeMillis() < deadline && !(sql.containsAll(wantSql) && tag.containsAll(wantTag))) {
            TimeUnit.MILLISECONDS.sleep(200);
        }
        TimeUnit.SECONDS.sleep(3);
        bySql.shutdown();
        byTag.shutdown();
        System.out.println("sql got " + sql);
        System.out.println("tag got " + tag);
        return sql.equals(wantSql) && tag.equals(wantTag) ? 0 : 1;
    }

    static DefaultMQPushConsumer consumer(String namesrv, String group, String run, Set<Integer> got, String name) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                if (run.equals(m.getUserProperty("run"))) {
                    System.out.println(name + " a=" + m.getUserProperty("a"));
                    got.add(Integer.parseInt(m.getUserProperty("a")));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return consumer;
    }
}
