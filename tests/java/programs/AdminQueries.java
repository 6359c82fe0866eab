import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * AdminQueries NAMESRV TOPIC: the admin API of a DefaultMQProducer on messages it just sent:
 * earliestMsgStoreTime of every queue (GET_EARLIEST_MSG_STORETIME), queryMessage by key and
 * viewMessage by unique id (QUERY_MESSAGE, the second with _UNIQUE_KEY_QUERY), and viewMessage by
 * offset message id (VIEW_MESSAGE_BY_ID), and the send's trace by its id in RMQ_SYS_TRACE_TOPIC (the
 * producer traces its sends, enableMsgTrace). Queue entries and the index are written a moment after the send: each lookup
 * is tried for up to 20 s. Prints "earliest Q T", "byKey KEY N", "byUniqueId ID ok", "trace ID ok", "byOffsetId ok";
 * exit 0 iff every one found what was sent.
 */
public class AdminQueries {
    public static void main(String[] args) {
        Exits.run(() -> queries(args));
    }

    static int queries(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        String run = Long.toString(System.nanoTime());
        // With message trace on, the client also sends each send's trace to RMQ_SYS_TRACE_TOPIC keyed by
        // the message id: what mqadmin queryMsgTraceById looks up (QUERY_MESSAGE on the trace topic).
        DefaultMQProducer producer = new DefaultMQProducer("AdminQueriesPG", true);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        long before = System.currentTimeMillis() - 1000;
        SendResult[] sent = new SendResult[3];
        for (int i = 0; i < sent.length; i++) {
            sent[i] = producer.send(new Message(topic, "TagA", run + "-key" + i, ("query body " + i).getBytes()));
            System.out.println("sent " + i + " " + sent[i].getSendStatus() + " " + sent[i].getMsgId());
        }
        boolean ok = true;
        Set<Integer> queues = new HashSet<>();
        for (SendResult r : sent) {
            MessageQueue mq = r.getMessageQueue();
            if (queues.add(mq.getQueueId())) {
                Long found = retry(() -> {   // -1 until the queue's entry is written
                    long t = producer.earliestMsgStoreTime(mq);
                    return t > 0 ? t : null;
                });
                long earliest = found == null ? -1 : found;
                System.out.println("earliest " + mq.getQueueId() + " " + earliest);
                ok &= earliest > 0 && earliest <= System.currentTimeMillis();
            }
        }
        for (int i = 0; i < sent.length; i++) {
            String key = run + "-key" + i;
            List<MessageExt> found = retry(() -> producer.queryMessage(topic, key, 32, before,
                System.currentTimeMillis() + 1000).getMessageList());
            System.out.println("byKey " + key + " " + (found == null ? 0 : found.size()));
            ok &= found != null && found.size() == 1 && new String(found.get(0).getBody()).equals("query body " + i);
            String uniqueId = sent[i].getMsgId();
            MessageExt byId = retry(() -> producer.viewMessage(topic, uniqueId));
            boolean idOk = byId != null && new String(byId.getBody()).equals("query body " + i);
            System.out.println("byUniqueId " + uniqueId + " " + (idOk ? "ok" : "missing"));
            ok &= idOk;
        }
        String traced = sent[0].getMsgId();
        List<MessageExt> traces = retry(() -> producer.queryMessage("RMQ_SYS_TRACE_TOPIC", traced, 32, before,
            System.currentTimeMillis() + 1000).getMessageList());
        boolean traceOk = traces != null && new String(traces.get(0).getBody()).contains(traced);
        System.out.println("trace " + traced + " " + (traceOk ? "ok" : "missing"));
        ok &= traceOk;
        MessageExt byOffset = producer.viewMessage(sent[0].getOffsetMsgId());
        boolean offsetOk = byOffset != null && new String(byOffset.getBody()).equals("query body 0");
        System.out.println("byOffsetId " + (offsetOk ? "ok" : "missing"));
        ok &= offsetOk;
        producer.shutdown();
        return ok ? 0 : 1;
    }

    interface Lookup<T> {
        T get() throws Exception;
    }

    /** The lookup's answer, tried every 500 ms for up to 20 s while it throws or finds nothing. */
    static <T> T retry(Lookup<T> lookup) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 20_000;
        Exception last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                T found = lookup.get();
                if (found != null) {
                    return found;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(500);
        }
        System.out.println("lookup failed: " + last);
        return null;
    }
}
