/** Throughput of RocketMQ's Java client against a remoting door (issue 33 item 1; perf/remoting_clients.py runs it):
 *  sync (one thread, p50/p99), async (N in flight, default 64), push (drain a topic). One JSON line on stdout. */
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.client.consumer.*;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

public class RemotingBench {
    public static void main(String[] a) throws Exception {
        String mode = a[0], ns = a[1], topic = a[2]; int n = Integer.parseInt(a[3]);
        byte[] body = new byte[100]; Arrays.fill(body, (byte) 'x');
        if (mode.equals("push")) {
            DefaultMQPushConsumer c = new DefaultMQPushConsumer("GID_B" + System.nanoTime());
            c.setNamesrvAddr(ns); c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET); c.subscribe(topic, "*");
            AtomicInteger got = new AtomicInteger(); AtomicLong first = new AtomicLong(), last = new AtomicLong();
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                long t = System.nanoTime(); first.compareAndSet(0, t); last.set(t); got.addAndGet(msgs.size());
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS; });
            c.start(); long dl = System.nanoTime() + 120_000_000_000L;
            while (got.get() < n && System.nanoTime() < dl) Thread.sleep(10);
            double el = (last.get() - first.get()) / 1e9;
            System.out.printf("{\"mode\":\"push\",\"n\":%d,\"rate\":%.0f}%n", got.get(), got.get() / el);
            c.shutdown(); System.exit(0);
        }
        DefaultMQProducer p = new DefaultMQProducer("PID_B" + System.nanoTime()); p.setNamesrvAddr(ns); p.setSendMsgTimeout(10000); p.start();
        for (int i = 0; i < 300; i++) p.send(new Message(topic, body));
        if (mode.equals("sync")) {
            long[] lat = new long[n]; int fails = 0; long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) { long s = System.nanoTime();
                try { if (p.send(new Message(topic, body)).getSendStatus() != SendStatus.SEND_OK) fails++; } catch (Exception e) { fails++; }
                lat[i] = System.nanoTime() - s; }
            double el = (System.nanoTime() - t0) / 1e9; Arrays.sort(lat);
            System.out.printf("{\"mode\":\"sync\",\"n\":%d,\"rate\":%.0f,\"fails\":%d,\"p50_us\":%.0f,\"p99_us\":%.0f}%n", n, n / el, fails, lat[n/2]/1e3, lat[(int)(n*0.99)]/1e3);
        } else {
            int inflight = a.length > 4 ? Integer.parseInt(a[4]) : 64;
            Semaphore sem = new Semaphore(inflight); AtomicInteger fails = new AtomicInteger(); CountDownLatch done = new CountDownLatch(n);
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) { sem.acquire();
                p.send(new Message(topic, body), new SendCallback() {
                    public void onSuccess(SendResult r) { sem.release(); done.countDown(); }
                    public void onException(Throwable e) { fails.incrementAndGet(); sem.release(); done.countDown(); } }); }
            done.await(300, TimeUnit.SECONDS); double el = (System.nanoTime() - t0) / 1e9;
            System.out.printf("{\"mode\":\"async\",\"n\":%d,\"rate\":%.0f,\"fails\":%d}%n", n, n / el, fails.get());
        }
        p.shutdown(); System.exit(0);
    }
}
