import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * RequestReply NAMESRV TOPIC COUNT: a responder (push consumer + producer) answers every request on
 * TOPIC with MessageUtil.createReplyMessage (which needs the CLUSTER property the broker stamps); a
 * requester's DefaultMQProducer.request(msg, 10 s) sends COUNT requests one after another. Prints
 * "reply i BODY" per answer; exit 0 iff every reply came back with "re:" + its request's body.
 */
public class RequestReply {
    public static void main(String[] args) {
        Exits.run(() -> requestReply(args));
    }

    static int requestReply(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        String run = Long.toString(System.nanoTime());
        DefaultMQProducer requester = new DefaultMQProducer("RequesterPG" + run);
        requester.setNamesrvAddr(namesrv);
        requester.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        requester.start();
        requester.send(new Message(topic, "warm-up".getBytes()));   // the topic exists before the responder subscribes

        DefaultMQProducer replier = new DefaultMQProducer("ReplierPG" + run);
        replier.setNamesrvAddr(namesrv);
        replier.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        replier.start();
        DefaultMQPushConsumer responder = new DefaultMQPushConsumer("ResponderCG" + run);
        responder.setNamesrvAddr(namesrv);
        responder.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        responder.subscribe(topic, "*");
        responder.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt m : messages) {
                if (m.getProperty("REPLY_TO_CLIENT") == null) {
                    continue;
                }
                try {
                    Message reply = MessageUtil.createReplyMessage(m, ("re:" + new String(m.getBody())).getBytes());
                    replier.send(reply, 5000);
                } catch (Exception e) {
                    System.out.println("responder failed: " + e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        responder.start();
        Thread.sleep(3000);   // the responder's queues allocated before the first request

        int ok = 0;
        for (int i = 0; i < count; i++) {
            String body = run + "-" + i;
            Message answer = requester.request(new Message(topic, body.getBytes()), 10_000);
            String got = answer == null ? "null" : new String(answer.getBody());
            System.out.println("reply " + i + " " + got);
            if (got.equals("re:" + body)) {
                ok++;
            }
        }
        responder.shutdown();
        replier.shutdown();
        requester.shutdown();
        System.out.println("replies " + ok + " of " + count);
        return ok == count ? 0 : 1;
    }
}
