// RocketMQ 5's official Node.js client (npm rocketmq-client-nodejs, installed by `make node-client`
// into .node/) against a gRPC door: the Node twin of perf/grpc_bench.py, run by perf/door_rows.py.
//
//     node perf/grpc_node_bench.js MODE '{"endpoint": ..., "topic": ..., ...}'
//
// Modes, each printing one JSON line on stdout:
// - sync: `count` sends of `body_bytes`, one at a time after `warmup`: latencies_us;
// - async: `count` sends with at most `window` in flight: count, failed, elapsed_s, p50_us, p99_us (each send's
//   time from its call to its answer, queueing in the client included);
// - receive: SimpleConsumer receive (`batch` at a time) and ack each, acks of a batch in flight
//   together, until `count` messages: count, failed_acks, elapsed_s from the first message received.
// Every loop stops at `max_s`; the process exits when done (the client keeps timers alive).
'use strict';

const path = require('path');
const CLIENT = process.env.ROCKETBOX_NODE_CLIENT
  || path.join(__dirname, '..', '.node', 'node_modules', 'rocketmq-client-nodejs');
const { Producer, SimpleConsumer } = require(CLIENT);

// The client logs every route refresh through egg-logger by default; the bench prints one line.
const quiet = { info() {}, warn() {}, debug() {}, error(...args) { process.stderr.write(args.join(' ') + '\n'); } };

function options(spec) {
  return { endpoints: spec.endpoint, namespace: '', requestTimeout: 10000, logger: quiet };
}

async function startedProducer(spec) {
  const producer = new Producer({ ...options(spec), topics: [spec.topic] });
  await producer.startup();
  const body = Buffer.alloc(spec.body_bytes, 'x');
  for (let i = 0; i < spec.warmup; i++) {
    await producer.send({ topic: spec.topic, body });
  }
  return { producer, body };
}

async function syncSends(spec) {
  const { producer, body } = await startedProducer(spec);
  const latencies = [];
  const deadline = Date.now() + spec.max_s * 1000;
  try {
    for (let i = 0; i < spec.count && Date.now() < deadline; i++) {
      const started = process.hrtime.bigint();
      await producer.send({ topic: spec.topic, body });
      latencies.push(Number(process.hrtime.bigint() - started) / 1000);
    }
  } finally {
    await producer.shutdown();
  }
  return { latencies_us: latencies };
}

async function asyncSends(spec) {
  const { producer, body } = await startedProducer(spec);
  const deadline = Date.now() + spec.max_s * 1000;
  let sent = 0;
  let failed = 0;
  const latencies = [];
  const started = process.hrtime.bigint();
  // `window` senders, each awaiting its send before the next: at most `window` in flight.
  async function sender() {
    while (sent < spec.count && Date.now() < deadline) {
      sent++;
      const sendStarted = process.hrtime.bigint();
      try {
        await producer.send({ topic: spec.topic, body });
        latencies.push(Number(process.hrtime.bigint() - sendStarted) / 1000);
      } catch (err) {
        failed++;
      }
    }
  }
  await Promise.all(Array.from({ length: spec.window }, sender));
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  await producer.shutdown();
  latencies.sort((a, b) => a - b);
  const at = (q) => (latencies.length ? Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]) : null);
  return { count: sent - failed, failed, elapsed_s: elapsed, p50_us: at(0.5), p99_us: at(0.99) };
}

async function receive(spec) {
  const consumer = new SimpleConsumer({
    ...options(spec), consumerGroup: spec.group, subscriptions: new Map([[spec.topic, '*']]), awaitDuration: 5000,
  });
  await consumer.startup();
  let received = 0;
  let failedAcks = 0;
  let started = null;
  const deadline = Date.now() + spec.max_s * 1000;
  try {
    while (received < spec.count && Date.now() < deadline) {
      const messages = await consumer.receive(spec.batch, 30000);
      if (started === null && messages.length) started = process.hrtime.bigint();
      // A failed ack (the proxy's PROXY_TIMEOUT on a loaded machine) is counted, not fatal: the
      // message was received; it comes back after its invisible time.
      await Promise.all(messages.map((message) => consumer.ack(message).catch(() => { failedAcks++; })));
      received += messages.length;
    }
  } finally {
    await consumer.shutdown();
  }
  const elapsed = started === null ? 0 : Number(process.hrtime.bigint() - started) / 1e9;
  return { count: received, failed_acks: failedAcks, elapsed_s: elapsed };
}

const MODES = { sync: syncSends, async: asyncSends, receive };

const [mode, specText] = process.argv.slice(2);
MODES[mode](JSON.parse(specText)).then(
  (result) => { process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0)); },
  (err) => { process.stderr.write(`${err && err.stack ? err.stack : err}\n`, () => process.exit(1)); },
);
