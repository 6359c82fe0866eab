/* A lean load client of the proxy's MessagingService over grpc-java (Netty), the transport RocketMQ's Java 5.x
 * client uses, through the stubs protoc generates from the proxy's own descriptors (perf/grpc_java_build.py).
 * It drives the door the way the official clients do (one message a SendMessage call, a window of calls in
 * flight; ReceiveMessage of a batch, one AckMessage a handle), with little client-side work per message, so
 * the door rather than the client is the bound (the Node.js client spends ~1 ms of CPU a send).
 *
 * Arguments: host:port topic group count window batch body_bytes warmup receivers. Prints a JSON line as each phase ends
 * (the caller reads the servers' CPU between them): {"warm": true} once the warm-up sends are answered, then
 * {"send": {count, elapsed_s, rate, p50_us, p99_us, failed}}, then {"receive": {count, elapsed_s, rate, failed_acks}}.
 */

import apache.rocketmq.v2.*;
import com.google.protobuf.ByteString;
import com.google.protobuf.Duration;
import com.google.protobuf.Timestamp;
import io.grpc.*;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;

import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicInteger;

public final class GrpcJavaLoad {
    static final Metadata.Key<String> CLIENT_ID = Metadata.Key.of("x-mq-client-id", Metadata.ASCII_STRING_MARSHALLER);
    static final long PHASE_DEADLINE_S = 300;

    static String topic, group;
    static final String clientId = "grpc-java-load@" + ProcessHandle.current().pid() + "@0@" + System.nanoTime();

    public static void main(String[] args) throws Exception {
        String[] endpoint = args[0].split(":");
        topic = args[1];
        group = args[2];
        int count = Integer.parseInt(args[3]), window = Integer.parseInt(args[4]), batch = Integer.parseInt(args[5]);
        byte[] body = new byte[Integer.parseInt(args[6])];
        int warmup = Integer.parseInt(args[7]), receivers = Integer.parseInt(args[8]);
        Arrays.fill(body, (byte) 'x');
        ManagedChannel channel = NettyChannelBuilder.forAddress(endpoint[0], Integer.parseInt(endpoint[1]))
            .usePlaintext().maxInboundMessageSize(16 << 20).build();
        try {
            Channel named = ClientInterceptors.intercept(channel, withClientId());
            MessagingServiceGrpc.MessagingServiceStub stub = MessagingServiceGrpc.newStub(named);
            sends(stub, warmup, window, body);
            System.out.println("{\"warm\": true}");
            System.out.flush();
            System.out.println(json(Map.of("send", sends(stub, count, window, body))));
            System.out.flush();
            System.out.println(json(Map.of("receive", receiveAndAck(stub, count + warmup, window, batch, receivers))));
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        System.exit(0);
    }

    /* count sends, at most window in flight; each call's time from its start to its answer. */
    static Map<String, Object> sends(MessagingServiceGrpc.MessagingServiceStub stub, int count, int window,
                                     byte[] body) throws Exception {
        Semaphore slots = new Semaphore(window);
        long[] latencies = new long[count];
        AtomicInteger failed = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(count);
        ByteString payload = ByteString.copyFrom(body);
        long started = System.nanoTime();
        for (int i = 0; i < count; i++) {
            if (!slots.tryAcquire(PHASE_DEADLINE_S, TimeUnit.SECONDS)) throw new IllegalStateException("sends stalled");
            final int at = i;
            final long callStarted = System.nanoTime();
            stub.withDeadlineAfter(30, TimeUnit.SECONDS).sendMessage(
                SendMessageRequest.newBuilder().addMessages(message(payload)).build(),
                new StreamObserver<SendMessageResponse>() {
                    public void onNext(SendMessageResponse r) {
                        if (r.getStatus().getCode() != Code.OK) failed.incrementAndGet();
                    }
                    public void onError(Throwable t) { failed.incrementAndGet(); finish(); }
                    public void onCompleted() { finish(); }
                    void finish() {
                        latencies[at] = System.nanoTime() - callStarted;
                        slots.release();
                        done.countDown();
                    }
                });
        }
        if (!done.await(PHASE_DEADLINE_S, TimeUnit.SECONDS)) throw new IllegalStateException("sends did not end");
        double elapsed = (System.nanoTime() - started) / 1e9;
        Arrays.sort(latencies);
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("count", count);
        row.put("elapsed_s", elapsed);
        row.put("rate", Math.round(count / elapsed));
        row.put("p50_us", latencies[count / 2] / 1000);
        row.put("p99_us", latencies[Math.min(count - 1, count * 99 / 100)] / 1000);
        row.put("failed", failed.get());
        return row;
    }

    /* ReceiveMessage calls of batch messages from receivers loops at once (each one call after another, as
     * a SimpleConsumer's), until expected messages came; each acked by its own AckMessage call, at most
     * window acks in flight. */
    static Map<String, Object> receiveAndAck(MessagingServiceGrpc.MessagingServiceStub stub, int expected, int window,
                                             int batch, int receivers) throws Exception {
        Semaphore slots = new Semaphore(window);
        AtomicInteger failedAcks = new AtomicInteger();
        Set<String> seen = ConcurrentHashMap.newKeySet();
        long started = System.nanoTime(), deadline = started + TimeUnit.SECONDS.toNanos(PHASE_DEADLINE_S);
        ReceiveMessageRequest request = ReceiveMessageRequest.newBuilder().setGroup(resource(group))
            .setMessageQueue(MessageQueue.newBuilder().setTopic(resource(topic)).setId(-1)
                .setBroker(Broker.newBuilder().setName("broker-a")))
            .setFilterExpression(FilterExpression.newBuilder().setType(FilterType.TAG).setExpression("*"))
            .setBatchSize(batch).setInvisibleDuration(Duration.newBuilder().setSeconds(60))
            .setLongPollingTimeout(Duration.newBuilder().setSeconds(2)).build();
        ExecutorService loops = Executors.newFixedThreadPool(receivers);
        List<Future<?>> running = new ArrayList<>();
        for (int r = 0; r < receivers; r++)
            running.add(loops.submit(() -> {
                while (seen.size() < expected && System.nanoTime() < deadline) {
                    for (apache.rocketmq.v2.Message m : receiveOnce(stub, request)) {
                        SystemProperties p = m.getSystemProperties();
                        seen.add(p.getMessageId());
                        if (!slots.tryAcquire(PHASE_DEADLINE_S, TimeUnit.SECONDS))
                            throw new IllegalStateException("acks stalled");
                        ack(stub, p, slots, failedAcks);
                    }
                }
                return null;
            }));
        for (Future<?> loop : running)
            loop.get(PHASE_DEADLINE_S + 60, TimeUnit.SECONDS);
        loops.shutdown();
        if (!slots.tryAcquire(window, PHASE_DEADLINE_S, TimeUnit.SECONDS)) throw new IllegalStateException("acks did not end");
        double elapsed = (System.nanoTime() - started) / 1e9;
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("count", seen.size());
        row.put("elapsed_s", elapsed);
        row.put("rate", Math.round(seen.size() / elapsed));
        row.put("failed_acks", failedAcks.get());
        return row;
    }

    static List<apache.rocketmq.v2.Message> receiveOnce(MessagingServiceGrpc.MessagingServiceStub stub,
                                                       ReceiveMessageRequest request) throws Exception {
        List<apache.rocketmq.v2.Message> got = Collections.synchronizedList(new ArrayList<>());
        CompletableFuture<io.grpc.Status> ended = new CompletableFuture<>();
        stub.withDeadlineAfter(30, TimeUnit.SECONDS).receiveMessage(request,
            new StreamObserver<ReceiveMessageResponse>() {
                public void onNext(ReceiveMessageResponse r) { if (r.hasMessage()) got.add(r.getMessage()); }
                public void onError(Throwable t) { ended.complete(io.grpc.Status.fromThrowable(t)); }
                public void onCompleted() { ended.complete(io.grpc.Status.OK); }
            });
        ended.get(60, TimeUnit.SECONDS);
        return got;
    }

    static void ack(MessagingServiceGrpc.MessagingServiceStub stub, SystemProperties p, Semaphore slots,
                    AtomicInteger failedAcks) {
        stub.withDeadlineAfter(30, TimeUnit.SECONDS).ackMessage(AckMessageRequest.newBuilder()
                .setGroup(resource(group)).setTopic(resource(topic)).addEntries(AckMessageEntry.newBuilder()
                    .setMessageId(p.getMessageId()).setReceiptHandle(p.getReceiptHandle())).build(),
            new StreamObserver<AckMessageResponse>() {
                public void onNext(AckMessageResponse r) {
                    if (r.getStatus().getCode() != Code.OK) failedAcks.incrementAndGet();
                }
                public void onError(Throwable t) { failedAcks.incrementAndGet(); slots.release(); }
                public void onCompleted() { slots.release(); }
            });
    }

    static apache.rocketmq.v2.Message message(ByteString body) {
        long now = System.currentTimeMillis();
        return apache.rocketmq.v2.Message.newBuilder().setTopic(resource(topic)).setBody(body)
            .setSystemProperties(SystemProperties.newBuilder()
                .setMessageId(UUID.randomUUID().toString().replace("-", "").toUpperCase())
                .setBodyEncoding(Encoding.IDENTITY).setMessageType(MessageType.NORMAL)
                .setBornHost("127.0.0.1").setBornTimestamp(Timestamp.newBuilder().setSeconds(now / 1000)
                    .setNanos((int) (now % 1000) * 1_000_000))).build();
    }

    static Resource resource(String name) {
        return Resource.newBuilder().setName(name).build();
    }

    static ClientInterceptor withClientId() {
        return new ClientInterceptor() {
            @Override
            public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<Q, A>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<A> listener, Metadata headers) {
                        headers.put(CLIENT_ID, clientId);
                        super.start(listener, headers);
                    }
                };
            }
        };
    }

    static String json(Object value) {
        if (value instanceof Map) {
            StringJoiner s = new StringJoiner(", ", "{", "}");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet())
                s.add("\"" + e.getKey() + "\": " + json(e.getValue()));
            return s.toString();
        }
        return String.valueOf(value);
    }
}
