/* Our own grpc-java (Netty) client of the proxy's MessagingService, through the stubs protoc's grpc-java
 * plugin generates from the proto descriptors the proxy serves (tests/grpc/grpc_java.py compiles both at
 * test time). It checks what grpc-java does on HTTP/2 that grpc C-core and grpc-js do not: its own
 * flow-control window updates and BDP PINGs, Netty's HPACK, a 3 MiB message split over many DATA frames,
 * RST_STREAM on a cancel and on an expired deadline, 64 calls in flight on one connection, GOAWAY when a
 * channel shuts down and when the server stops. Every frame either way is counted from Netty's frame
 * logger (java.util.logging, io.grpc.netty.NettyClientHandler at FINE).
 *
 * Arguments: host:port topic group accessKey secretKey. Prints {"holding": true} once its checks are done
 * and a Telemetry stream is open, then waits for that stream to end (the test stops the proxy: its GOAWAY),
 * reads a line from stdin (the new proxy is up), makes its last check and prints one line:
 * {"checks": {name: {"ok": bool, "detail": text}}, "frames": {"INBOUND DATA": n, ...}, "bytes": {...}}.
 */

import apache.rocketmq.v2.*;
import com.google.protobuf.ByteString;
import com.google.protobuf.Duration;
import com.google.protobuf.Timestamp;
import io.grpc.*;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.text.SimpleDateFormat;
import java.util.*;
import java.util.concurrent.*;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class GrpcJavaProbe {
    static final Metadata.Key<String> CLIENT_ID = Metadata.Key.of("x-mq-client-id", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> DATE_TIME = Metadata.Key.of("x-mq-date-time", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    static final int LARGE_BODY = 3 << 20;
    static final int IN_FLIGHT = 64;
    static final Pattern FRAME = Pattern.compile("(INBOUND|OUTBOUND) ([A-Z_]+)");

    static final Pattern LENGTH = Pattern.compile("length=(\\d+)");
    static final boolean TRACE = System.getenv("GRPC_JAVA_PROBE_TRACE") != null;   // every frame to stderr

    static final Map<String, Integer> frames = new TreeMap<>();
    static final Map<String, Long> bytes = new TreeMap<>();   // the frames' payload bytes by direction and type
    static final List<String> goaways = new ArrayList<>();
    static final Map<String, Map<String, Object>> checks = new LinkedHashMap<>();

    static String host, topic, group, accessKey, secretKey;
    static int port;
    static final String clientId = "grpc-java-probe@" + ProcessHandle.current().pid() + "@0@" + System.nanoTime();

    public static void main(String[] args) throws Exception {
        String[] endpoint = args[0].split(":");
        host = endpoint[0];
        port = Integer.parseInt(endpoint[1]);
        topic = args[1];
        group = args[2];
        accessKey = args[3];
        secretKey = args[4];
        countFrames();
        ManagedChannel channel = channel();
        try {
            Channel signed = ClientInterceptors.intercept(channel, signing(true, secretKey));
            MessagingServiceGrpc.MessagingServiceBlockingStub blocking =
                MessagingServiceGrpc.newBlockingStub(signed).withDeadlineAfter(30, TimeUnit.SECONDS);
            run("query_route", () -> queryRoute(blocking));
            run("telemetry_settings", () -> telemetry(signed));
            String small = run("send_small", () -> send(blocking, "small-" + clientId, "grpc-java small".getBytes()));
            byte[] large = new byte[LARGE_BODY];
            new Random(7).nextBytes(large);
            String largeId = run("send_3mib", () -> send(blocking, "large-" + clientId, large));
            run("receive_and_ack", () -> receiveAndAck(signed, blocking, small, largeId, digest(large)));
            run("long_poll_empty", () -> longPollEmpty(signed));
            run("deadline_expires", () -> deadlineExpires(signed));
            if (TRACE) System.err.println("---- cancel");
            run("cancel", () -> cancel(signed));
            if (TRACE) System.err.println("---- cancel done");
            run("metadata", () -> metadata(channel));
            run("trailers_only", () -> trailersOnly(signed));
            run("in_flight_64", () -> inFlight(signed));
            run("after_all", () -> queryRoute(blocking));
        } finally {
            channel.shutdown();
            boolean ended = channel.awaitTermination(10, TimeUnit.SECONDS);
            put("channel_shutdown", ended && count("OUTBOUND GO_AWAY") > 0,
                "terminated " + ended + ", GOAWAYs " + goaways);
        }
        serverGoaway();
        // a line on stdin: the test saw the supervisor's new proxy running
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        run("long_error_message", GrpcJavaProbe::longErrorMessage);   // last: grpc.aio fails it (see there)
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("checks", checks);
        out.put("frames", frames);
        out.put("bytes", bytes);
        System.out.println(json(out));
        System.exit(0);
    }

    // ------------------------------------------------------------ the checks

    static String queryRoute(MessagingServiceGrpc.MessagingServiceBlockingStub stub) {
        QueryRouteResponse r = stub.queryRoute(QueryRouteRequest.newBuilder().setTopic(resource(topic))
            .setEndpoints(Endpoints.newBuilder().setScheme(AddressScheme.IPv4)
                .addAddresses(Address.newBuilder().setHost(host).setPort(port))).build());
        expect(r.getStatus(), Code.OK);
        if (r.getMessageQueuesCount() == 0) throw new IllegalStateException("no message queues");
        return r.getMessageQueuesCount() + " queues";
    }

    static String telemetry(Channel channel) throws Exception {
        CompletableFuture<TelemetryCommand> first = new CompletableFuture<>();
        CompletableFuture<Status> ended = new CompletableFuture<>();
        StreamObserver<TelemetryCommand> out = MessagingServiceGrpc.newStub(channel)
            .withDeadlineAfter(30, TimeUnit.SECONDS).telemetry(observer(first, ended));
        out.onNext(TelemetryCommand.newBuilder().setSettings(Settings.newBuilder()
            .setClientType(ClientType.PRODUCER)
            .setPublishing(Publishing.newBuilder().addTopics(resource(topic)))).build());
        TelemetryCommand answer = first.get(20, TimeUnit.SECONDS);
        long maxBody = answer.getSettings().getPublishing().getMaxBodySize();
        if (maxBody < LARGE_BODY) throw new IllegalStateException("max body size " + maxBody);
        out.onCompleted();
        Status status = ended.get(20, TimeUnit.SECONDS);
        if (!status.isOk()) throw new IllegalStateException("stream ended " + status);
        return "maxBodySize " + maxBody;
    }

    static String send(MessagingServiceGrpc.MessagingServiceBlockingStub stub, String key, byte[] body) {
        SendMessageResponse r = stub.sendMessage(SendMessageRequest.newBuilder().addMessages(message(key, body)).build());
        expect(r.getStatus(), Code.OK);
        SendResultEntry entry = r.getEntries(0);
        expect(entry.getStatus(), Code.OK);
        return entry.getMessageId();
    }

    /* Long-polling receives until both messages came (each body checked), each acked. */
    static String receiveAndAck(Channel channel, MessagingServiceGrpc.MessagingServiceBlockingStub blocking,
                                String small, String large, String largeDigest) throws Exception {
        Map<String, Message> got = new HashMap<>();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (got.size() < 2 && System.nanoTime() < until) {
            for (ReceiveMessageResponse r : receive(channel, 5, 10)) {
                if (r.hasMessage()) got.put(r.getMessage().getSystemProperties().getMessageId(), r.getMessage());
            }
        }
        if (!got.keySet().equals(new HashSet<>(List.of(small, large))))
            throw new IllegalStateException("received " + got.keySet());
        if (!digest(got.get(large).getBody().toByteArray()).equals(largeDigest))
            throw new IllegalStateException("3 MiB body differs");
        if (!got.get(small).getBody().toStringUtf8().equals("grpc-java small"))
            throw new IllegalStateException("small body differs");
        for (Message m : got.values()) {
            AckMessageResponse r = blocking.ackMessage(AckMessageRequest.newBuilder().setGroup(resource(group))
                .setTopic(resource(topic)).addEntries(AckMessageEntry.newBuilder()
                    .setMessageId(m.getSystemProperties().getMessageId())
                    .setReceiptHandle(m.getSystemProperties().getReceiptHandle())).build());
            expect(r.getStatus(), Code.OK);
            expect(r.getEntries(0).getStatus(), Code.OK);
        }
        return "2 received (3 MiB body intact), 2 acked";
    }

    static String longPollEmpty(Channel channel) {
        long started = System.nanoTime();
        List<ReceiveMessageResponse> answers = receive(channel, 2, 30);
        long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
        if (answers.isEmpty() || answers.get(0).getStatus().getCode() != Code.MESSAGE_NOT_FOUND)
            throw new IllegalStateException("answers " + answers);
        if (waitedMs < 1000) throw new IllegalStateException("answered after " + waitedMs + " ms, not held");
        return "MESSAGE_NOT_FOUND after the long poll";
    }

    /* A Telemetry stream the client keeps open past its 1 s deadline: grpc-java ends it DEADLINE_EXCEEDED
     * and resets the stream (RST_STREAM CANCEL). */
    static String deadlineExpires(Channel channel) throws Exception {
        int resets = count("OUTBOUND RST_STREAM");
        CompletableFuture<Status> ended = new CompletableFuture<>();
        StreamObserver<TelemetryCommand> out = MessagingServiceGrpc.newStub(channel)
            .withDeadlineAfter(1, TimeUnit.SECONDS).telemetry(observer(new CompletableFuture<>(), ended));
        out.onNext(TelemetryCommand.newBuilder().setSettings(Settings.newBuilder().setClientType(ClientType.PRODUCER)
            .setPublishing(Publishing.newBuilder().addTopics(resource(topic)))).build());
        Status status = ended.get(20, TimeUnit.SECONDS);
        if (status.getCode() != Status.Code.DEADLINE_EXCEEDED) throw new IllegalStateException("ended " + status);
        awaitMore("OUTBOUND RST_STREAM", resets);
        return "DEADLINE_EXCEEDED, stream reset";
    }

    /* A long poll cancelled once the request is on the wire: CANCELLED here, RST_STREAM to the proxy, and
     * the same channel serves on. */
    static String cancel(Channel channel) throws Exception {
        int resets = count("OUTBOUND RST_STREAM"), data = count("OUTBOUND DATA");
        CompletableFuture<Status> ended = new CompletableFuture<>();
        Context.CancellableContext context = Context.current().withCancellation();
        context.run(() -> MessagingServiceGrpc.newStub(channel).withDeadlineAfter(60, TimeUnit.SECONDS)
            .receiveMessage(receiveRequest(30), observer(new CompletableFuture<>(), ended)));
        awaitMore("OUTBOUND DATA", data);   // the request is out
        context.cancel(null);
        Status status = ended.get(10, TimeUnit.SECONDS);
        if (status.getCode() != Status.Code.CANCELLED) throw new IllegalStateException("ended " + status);
        awaitMore("OUTBOUND RST_STREAM", resets);
        queryRoute(MessagingServiceGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS));
        return "CANCELLED, stream reset, channel serves on";
    }

    /* The call's metadata reaches the handlers: without x-mq-client-id CLIENT_ID_REQUIRED, with a wrong
     * signature UNAUTHORIZED. */
    static String metadata(Channel channel) {
        SendMessageRequest request = SendMessageRequest.newBuilder().addMessages(message("meta", new byte[]{1})).build();
        SendMessageResponse nameless = MessagingServiceGrpc.newBlockingStub(ClientInterceptors.intercept(channel,
            signing(false, secretKey))).withDeadlineAfter(10, TimeUnit.SECONDS).sendMessage(request);
        expect(nameless.getStatus(), Code.CLIENT_ID_REQUIRED);
        SendMessageResponse forged = MessagingServiceGrpc.newBlockingStub(ClientInterceptors.intercept(channel,
            signing(true, secretKey + "-wrong"))).withDeadlineAfter(10, TimeUnit.SECONDS).sendMessage(request);
        expect(forged.getStatus(), Code.UNAUTHORIZED);
        return "CLIENT_ID_REQUIRED without the id, UNAUTHORIZED with a wrong signature";
    }

    /* Refusals the door sends as a trailers-only response (one HEADERS with :status and grpc-status):
     * an unknown method, a message over the proxy's 16 MiB, a request that does not decode. */
    static String trailersOnly(Channel channel) {
        MethodDescriptor<byte[], byte[]> unknown = rawMethod("NoSuchRpc");
        Status missing = statusOf(() -> ClientCalls.blockingUnaryCall(channel, unknown,
            CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[0]));
        if (missing.getCode() != Status.Code.UNIMPLEMENTED) throw new IllegalStateException("unknown method: " + missing);
        MethodDescriptor<byte[], byte[]> send = rawMethod("SendMessage");
        Status junk = statusOf(() -> ClientCalls.blockingUnaryCall(channel, send,
            CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[]{(byte) 0xff, (byte) 0xff, 1}));
        // grpc.aio answers UNKNOWN ("Unexpected error ... DecodeError"), the native door INTERNAL as grpcio's
        // synchronous server and grpc-java's do: either refuses, neither is OK
        if (junk.getCode() != Status.Code.INTERNAL && junk.getCode() != Status.Code.UNKNOWN)
            throw new IllegalStateException("undecodable request: " + junk);
        Status large = statusOf(() -> ClientCalls.blockingUnaryCall(channel, send,
            CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), new byte[17 << 20]));
        if (large.getCode() != Status.Code.RESOURCE_EXHAUSTED) throw new IllegalStateException("17 MiB: " + large);
        return "UNIMPLEMENTED, " + junk.getCode() + ", RESOURCE_EXHAUSTED (" + large.getDescription() + ")";
    }

    /* An unknown method named by 3,000 non-ASCII bytes, on a channel of its own: the door's grpc-message
     * echoes the name percent-encoded (9,000 bytes) and must still fit the 8 KiB header list grpc-java
     * takes (its SETTINGS_MAX_HEADER_LIST_SIZE), or grpc-java drops the trailers. grpc.aio does not pass
     * this one (the test asserts it on the native door only): the call ends CANCELLED. */
    static String longErrorMessage() throws InterruptedException {
        ManagedChannel channel = channel();
        try {
            Status status = statusOf(() -> ClientCalls.blockingUnaryCall(channel, rawMethod("\u00e9".repeat(3000)),
                CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[0]));
            if (status.getCode() != Status.Code.UNIMPLEMENTED) throw new IllegalStateException(String.valueOf(status));
            return "UNIMPLEMENTED, grpc-message of " + status.getDescription().length() + " characters";
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
    }

    static MethodDescriptor<byte[], byte[]> rawMethod(String name) {
        MethodDescriptor.Marshaller<byte[]> raw = new MethodDescriptor.Marshaller<byte[]>() {
            public java.io.InputStream stream(byte[] value) { return new java.io.ByteArrayInputStream(value); }
            public byte[] parse(java.io.InputStream in) {
                try { return in.readAllBytes(); } catch (java.io.IOException e) { throw new IllegalStateException(e); }
            }
        };
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName(MethodDescriptor.generateFullMethodName("apache.rocketmq.v2.MessagingService", name))
            .setRequestMarshaller(raw).setResponseMarshaller(raw).build();
    }

    static Status statusOf(Runnable call) {
        try {
            call.run();
            return Status.OK;
        } catch (StatusRuntimeException e) {
            return e.getStatus();
        }
    }

    static String inFlight(Channel channel) throws Exception {
        MessagingServiceGrpc.MessagingServiceFutureStub stub = MessagingServiceGrpc.newFutureStub(channel)
            .withDeadlineAfter(60, TimeUnit.SECONDS);
        List<Future<SendMessageResponse>> calls = new ArrayList<>();
        for (int i = 0; i < IN_FLIGHT; i++)
            calls.add(stub.sendMessage(SendMessageRequest.newBuilder()
                .addMessages(message("flight-" + i, ("in flight " + i).getBytes())).build()));
        Set<String> ids = new HashSet<>();
        for (Future<SendMessageResponse> call : calls) {
            SendMessageResponse r = call.get(60, TimeUnit.SECONDS);
            expect(r.getStatus(), Code.OK);
            ids.add(r.getEntries(0).getMessageId());
        }
        if (ids.size() != IN_FLIGHT) throw new IllegalStateException(ids.size() + " distinct ids");
        return IN_FLIGHT + " sends in flight at once, all OK";
    }

    /* A Telemetry stream held open while the proxy stops: its GOAWAY reaches grpc-java. */
    static void serverGoaway() throws Exception {
        ManagedChannel channel = channel();
        int inbound = count("INBOUND GO_AWAY");
        CompletableFuture<TelemetryCommand> first = new CompletableFuture<>();
        CompletableFuture<Status> ended = new CompletableFuture<>();
        StreamObserver<TelemetryCommand> out = MessagingServiceGrpc.newStub(ClientInterceptors.intercept(channel,
            signing(true, secretKey))).telemetry(observer(first, ended));
        out.onNext(TelemetryCommand.newBuilder().setSettings(Settings.newBuilder().setClientType(ClientType.PRODUCER)
            .setPublishing(Publishing.newBuilder().addTopics(resource(topic)))).build());
        try {
            first.get(20, TimeUnit.SECONDS);
            // A long poll shorter than the proxy's 1 s grace (a tag no message has: it waits it out), in flight as
            // the proxy stops: it is answered.
            CompletableFuture<ReceiveMessageResponse> polled = new CompletableFuture<>();
            CompletableFuture<Status> pollEnded = new CompletableFuture<>();
            int data = count("OUTBOUND DATA");
            MessagingServiceGrpc.newStub(ClientInterceptors.intercept(channel, signing(true, secretKey)))
                .withDeadlineAfter(30, TimeUnit.SECONDS).receiveMessage(receiveRequest(0).toBuilder()
                    .setFilterExpression(FilterExpression.newBuilder().setType(FilterType.TAG).setExpression("untagged"))
                    .setLongPollingTimeout(Duration.newBuilder().setNanos(800_000_000)).build(),
                    observer(polled, pollEnded));
            awaitMore("OUTBOUND DATA", data);   // the poll is on the wire
            System.out.println("{\"holding\": true}");
            System.out.flush();
            Status status = ended.get(60, TimeUnit.SECONDS);
            put("server_goaway", count("INBOUND GO_AWAY") > inbound && !status.isOk(),
                "stream ended " + status + ", GOAWAYs " + goaways);
            Status pollStatus = pollEnded.get(30, TimeUnit.SECONDS);
            ReceiveMessageResponse answer = polled.isCompletedExceptionally() ? null : polled.getNow(null);
            put("stop_grace", pollStatus.isOk() && answer != null && answer.getStatus().getCode() == Code.MESSAGE_NOT_FOUND,
                "long poll in flight at the stop ended " + pollStatus + ", answer "
                    + (answer == null ? null : answer.getStatus().getCode()));
        } catch (Exception e) {
            put("server_goaway", false, e.toString());
            System.out.println("{\"holding\": false}");
        } finally {
            channel.shutdownNow();
        }
    }

    // ------------------------------------------------------------ requests and helpers

    static ManagedChannel channel() {
        return NettyChannelBuilder.forAddress(host, port).usePlaintext().maxInboundMessageSize(16 << 20).build();
    }

    static List<ReceiveMessageResponse> receive(Channel channel, int pollSeconds, int deadlineSeconds) {
        List<ReceiveMessageResponse> answers = new ArrayList<>();
        MessagingServiceGrpc.newBlockingStub(channel).withDeadlineAfter(deadlineSeconds, TimeUnit.SECONDS)
            .receiveMessage(receiveRequest(pollSeconds)).forEachRemaining(answers::add);
        return answers;
    }

    static ReceiveMessageRequest receiveRequest(int pollSeconds) {
        return ReceiveMessageRequest.newBuilder().setGroup(resource(group))
            .setMessageQueue(MessageQueue.newBuilder().setTopic(resource(topic)).setId(-1)
                .setBroker(Broker.newBuilder().setName("broker-a")))
            .setFilterExpression(FilterExpression.newBuilder().setType(FilterType.TAG).setExpression("*"))
            .setBatchSize(32).setInvisibleDuration(Duration.newBuilder().setSeconds(30))
            .setLongPollingTimeout(Duration.newBuilder().setSeconds(pollSeconds)).build();
    }

    static apache.rocketmq.v2.Message message(String key, byte[] body) {
        long now = System.currentTimeMillis();
        return apache.rocketmq.v2.Message.newBuilder().setTopic(resource(topic)).setBody(ByteString.copyFrom(body))
            .setSystemProperties(SystemProperties.newBuilder()
                .setMessageId(UUID.randomUUID().toString().replace("-", "").toUpperCase())
                .addKeys(key).setTag("java").setBodyEncoding(Encoding.IDENTITY).setMessageType(MessageType.NORMAL)
                .setBornHost("127.0.0.1").setBornTimestamp(Timestamp.newBuilder().setSeconds(now / 1000)
                    .setNanos((int) (now % 1000) * 1_000_000))).build();
    }

    static Resource resource(String name) {
        return Resource.newBuilder().setName(name).build();
    }

    /* Each call's headers as RocketMQ's Java client sets them: x-mq-client-id (when withClientId) and
     * the MQv2-HMAC-SHA1 signature of x-mq-date-time, hex upper case (its TLS-less ACL headers). */
    static ClientInterceptor signing(boolean withClientId, String secret) {
        return new ClientInterceptor() {
            @Override
            public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<Q, A>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<A> listener, Metadata headers) {
                        if (withClientId) headers.put(CLIENT_ID, clientId);
                        SimpleDateFormat format = new SimpleDateFormat("yyyyMMdd'T'HHmmss'Z'");
                        format.setTimeZone(TimeZone.getTimeZone("UTC"));
                        String dateTime = format.format(new Date());
                        headers.put(DATE_TIME, dateTime);
                        headers.put(AUTHORIZATION, "MQv2-HMAC-SHA1 Credential=" + accessKey
                            + ", SignedHeaders=x-mq-date-time, Signature=" + hmacSha1(secret, dateTime));
                        super.start(listener, headers);
                    }
                };
            }
        };
    }

    static String hmacSha1(String secret, String text) {
        try {
            Mac mac = Mac.getInstance("HmacSHA1");
            mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
            return hex(mac.doFinal(text.getBytes(StandardCharsets.UTF_8))).toUpperCase();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static String digest(byte[] data) {
        try {
            return hex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static String hex(byte[] bytes) {
        StringBuilder s = new StringBuilder();
        for (byte b : bytes) s.append(String.format("%02x", b));
        return s.toString();
    }

    static <T> StreamObserver<T> observer(CompletableFuture<T> first, CompletableFuture<Status> ended) {
        return new StreamObserver<T>() {
            public void onNext(T value) { first.complete(value); }
            public void onError(Throwable t) { ended.complete(Status.fromThrowable(t)); first.completeExceptionally(t); }
            public void onCompleted() {
                ended.complete(Status.OK);
                first.completeExceptionally(new IllegalStateException("no answer"));
            }
        };
    }

    static void expect(apache.rocketmq.v2.Status status, Code code) {
        if (status.getCode() != code) throw new IllegalStateException("status " + status.getCode() + " " + status.getMessage());
    }

    interface Step<T> { T call() throws Exception; }

    static <T> T run(String name, Step<T> step) {
        try {
            T value = step.call();
            put(name, true, String.valueOf(value));
            return value;
        } catch (Throwable t) {
            put(name, false, t.toString());
            return null;
        }
    }

    static void put(String name, boolean ok, String detail) {
        Map<String, Object> check = new LinkedHashMap<>();
        check.put("ok", ok);
        check.put("detail", detail);
        checks.put(name, check);
    }

    /* Netty's HTTP/2 frame logger (through java.util.logging when no SLF4J is on the class path). */
    static void countFrames() {
        Logger logger = Logger.getLogger("io.grpc.netty.NettyClientHandler");
        logger.setLevel(Level.FINE);
        logger.setUseParentHandlers(false);
        logger.addHandler(new Handler() {
            @Override
            public void publish(LogRecord record) {
                String text = record.getMessage();
                if (record.getParameters() != null) text += " " + Arrays.toString(record.getParameters());
                Matcher m = FRAME.matcher(text);
                if (!m.find()) return;
                if (TRACE) System.err.println(System.nanoTime() / 1000000 + " " + text.substring(m.start()));
                String key = m.group(1) + " " + m.group(2);
                Matcher length = LENGTH.matcher(text);
                synchronized (frames) {
                    frames.merge(key, 1, Integer::sum);
                    if (length.find(m.end())) bytes.merge(key, Long.parseLong(length.group(1)), Long::sum);
                    if (key.endsWith("GO_AWAY") && goaways.size() < 8)
                        goaways.add(text.substring(m.start()).replaceAll("\\s+", " "));
                }
            }
            @Override public void flush() {}
            @Override public void close() {}
        });
        loggerHolder = logger;   // java.util.logging holds loggers weakly
    }

    static Logger loggerHolder;

    /* Until more than `seen` frames of `key` went or came: grpc-java ends a call to its listener first
     * and writes the RST_STREAM on Netty's event loop after. */
    static void awaitMore(String key, int seen) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (count(key) <= seen) {
            if (System.nanoTime() > until) throw new IllegalStateException("no " + key + " in 10 s");
            Thread.sleep(2);
        }
    }

    static int count(String key) {
        synchronized (frames) {
            return frames.getOrDefault(key, 0);
        }
    }

    static String json(Object value) {
        if (value instanceof Map) {
            StringBuilder s = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (s.length() > 1) s.append(", ");
                s.append(json(String.valueOf(e.getKey()))).append(": ").append(json(e.getValue()));
            }
            return s.append('}').toString();
        }
        if (value instanceof Boolean || value instanceof Number) return String.valueOf(value);
        StringBuilder s = new StringBuilder("\"");
        for (char ch : String.valueOf(value).toCharArray()) {
            if (ch == '"' || ch == '\\') s.append('\\').append(ch);
            else if (ch < 0x20) s.append(String.format("\\u%04x", (int) ch));
            else s.append(ch);
        }
        return s.append('"').toString();
    }
}
