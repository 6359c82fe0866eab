import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * SteadyLoad NAMESRV TOPIC RATE SECONDS THREADS: sync sends of 1 KiB at RATE messages a second in all
 * (each of THREADS senders paced to RATE / THREADS a second, open loop: a late sender catches up) for
 * SECONDS, the client's retries off so every broker refusal counts. Prints "sent N ok M failed F" with
 * the failures' reasons counted, and the slowest send in ms; exit 0 iff none failed.
 */
public class SteadyLoad {
    public static void main(String[] args) {
        Exits.run(() -> load(args));
    }

    static int load(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int rate = Integer.parseInt(args[2]), seconds = Integer.parseInt(args[3]), threads = Integer.parseInt(args[4]);
        DefaultMQProducer producer = new DefaultMQProducer("SteadyLoadPG");
        producer.setNamesrvAddr(namesrv);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendMsgTimeout(Exits.SEND_TIMEOUT_MS);
        producer.start();
        byte[] body = new byte[1024];
        producer.send(new Message(topic, body));   // route and connection ready before the clock starts
        AtomicLong ok = new AtomicLong(), failed = new AtomicLong(), slowestUs = new AtomicLong();
        ConcurrentHashMap<String, AtomicLong> reasons = new ConcurrentHashMap<>();
        long perThread = (long) rate * seconds / threads;
        long intervalNs = 1_000_000_000L * threads / rate;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        long start = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            long offsetNs = intervalNs * t / threads;
            pool.submit(() -> {
                for (long i = 0; i < perThread; i++) {
                    long due = start + offsetNs + i * intervalNs;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        TimeUnit.NANOSECONDS.sleep(wait);
                    }
                    long t0 = System.nanoTime();
                    try {
                        if (producer.send(new Message(topic, body)).getSendStatus() == SendStatus.SEND_OK) {
                            ok.incrementAndGet();
                        } else {
                            failed.incrementAndGet();
                            reasons.computeIfAbsent("not SEND_OK", k -> new AtomicLong()).incrementAndGet();
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        String why = String.valueOf(e.getMessage());
                        why = why.length() > 90 ? why.substring(0, 90) : why;
                        reasons.computeIfAbsent(why.replace('\n', ' '), k -> new AtomicLong()).incrementAndGet();
                    }
                    slowestUs.accumulateAndGet((System.nanoTime() - t0) / 1000, Math::max);
                }
                return null;
            });
        }
        pool.shutdown();
        pool.awaitTermination(seconds + 120, TimeUnit.SECONDS);
        double took = (System.nanoTime() - start) / 1e9;
        producer.shutdown();
        System.out.printf("sent %d ok %d failed %d in %.1f s, slowest %.1f ms%n", ok.get() + failed.get(), ok.get(),
            failed.get(), took, slowestUs.get() / 1000.0);
        reasons.forEach((why, n) -> System.out.println("failure x" + n + ": " + why));
        return failed.get() == 0 ? 0 : 1;
    }
}
