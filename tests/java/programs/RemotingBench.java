/** Throughput of RocketMQ's Java client against a remoting door (issue 33 item 1; perf/remoting_clients.py runs it):
 *  sync (one thread, p50/p99), async (N in flight, default 64), push (drain a topic), e2e (a steady rate, send to
 *  consume p50/p99). One JSON line on stdout. */
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.client.consumer.*;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

public class RemotingBench {
    public static void main(String[] a) {
        try {
            run(a);
        } catch (Throwable t) {   // the clients' threads would keep the JVM up: out, with the reason
            t.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] a) throws Exception {
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
        if (mode.equals("e2e")) { e2e(ns, topic, n, a.length > 4 ? Integer.parseInt(a[4]) : 2000); return; }
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

    /** n sync sends of 100 B at a steady rate a second (4 senders, open loop, retries off), a push consumer
     *  of the same JVM stamping each on arrival: p50/p99 of send-to-consume, failed sends. */
    static void e2e(String ns, String topic, int n, int rate) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("PID_E" + System.nanoTime()); p.setNamesrvAddr(ns);
        p.setRetryTimesWhenSendFailed(0); p.setSendMsgTimeout(3000); p.start();
        byte[] body = new byte[100]; Arrays.fill(body, (byte) 'x');
        // The topic, its routes, connections; a first route lookup may time out on a busy machine.
        long warm = System.nanoTime() + 60_000_000_000L;
        for (int i = 0; i < 300; ) {
            try { p.send(new Message(topic, body)); i++; }
            catch (Exception e) { if (System.nanoTime() > warm) throw e; Thread.sleep(100); } }
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("GID_E" + System.nanoTime());
        c.setNamesrvAddr(ns); c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET); c.subscribe(topic, "*");
        long[] lat = new long[n]; AtomicInteger got = new AtomicInteger(), probes = new AtomicInteger();
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) { String k = m.getUserProperty("t0");
                if (k != null) { int i = got.getAndIncrement(); if (i < n) lat[i] = now - Long.parseLong(k); }
                else if (m.getUserProperty("probe") != null) probes.incrementAndGet(); }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS; });
        c.start();
        // The clock starts once the consumer holds every queue: probes until one of each 4 came back.
        long ready = System.nanoTime() + 60_000_000_000L;
        for (int sent = 0; System.nanoTime() < ready; sent++) {
            Message m = new Message(topic, body); m.putUserProperty("probe", "1");
            try { p.send(m); } catch (Exception e) { sent--; }
            if (sent >= 8 && probes.get() >= sent - 4) break;
            Thread.sleep(100); }
        int threads = 4; long interval = 1_000_000_000L * threads / rate; AtomicInteger fails = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(threads); long start = System.nanoTime();
        for (int t = 0; t < threads; t++) { long off = interval * t / threads;
            pool.submit(() -> { for (int i = 0; i < n / threads; i++) {
                long wait = start + off + i * interval - System.nanoTime();
                if (wait > 0) try { TimeUnit.NANOSECONDS.sleep(wait); } catch (InterruptedException e) { return; }
                Message m = new Message(topic, body); m.putUserProperty("t0", Long.toString(System.nanoTime()));
                try { if (p.send(m).getSendStatus() != SendStatus.SEND_OK) fails.incrementAndGet(); }
                catch (Exception e) { fails.incrementAndGet(); } } }); }
        pool.shutdown(); pool.awaitTermination(300, TimeUnit.SECONDS);
        double el = (System.nanoTime() - start) / 1e9;   // the sends' pace: below the rate when they fall behind
        int sent = n / threads * threads; long dl = System.nanoTime() + 30_000_000_000L;
        while (got.get() < sent - fails.get() && System.nanoTime() < dl) Thread.sleep(10);
        int m = Math.min(got.get(), n);
        long[] seen = Arrays.copyOf(lat, m); Arrays.sort(seen);
        System.out.printf("{\"mode\":\"e2e\",\"n\":%d,\"received\":%d,\"rate\":%.0f,\"fails\":%d,\"p50_us\":%.0f,\"p99_us\":%.0f}%n",
            sent, m, sent / el, fails.get(), m > 0 ? seen[m / 2] / 1e3 : -1.0, m > 0 ? seen[(int) (m * 0.99)] / 1e3 : -1.0);
        p.shutdown(); c.shutdown(); System.exit(0);
    }
}
