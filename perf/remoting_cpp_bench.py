"""RocketMQ's C++ client (.venv-rocketmq4) against a remoting door: ``sync`` (one thread, p50/p99),
``async`` (N in flight, default 64) or ``push`` (drain a topic); one JSON line on stdout.
Run by ``perf/remoting_clients.py`` with the C++ client's interpreter (never imports rocketbox);
exits through ``os._exit``: the wrapper's destructors can hang at exit (rocketmq-protocol.md §8)."""
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

STALL_S = 30.0   # no callback freed a slot for this long: the client lost them
MAX_S = 240.0    # issuing stops here (callers' timeouts are longer)

def main():
    mode, namesrv, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    body = b"x" * 100
    if mode in ("sync", "async"):
        p = Producer("PID_BENCH_%d" % os.getpid(), timeout=10000)
        p.set_namesrv_addr(namesrv); p.start()
        for _ in range(200):  # warm up: route + connection
            m = Message(topic); m.set_body(body); p.send_sync(m)
        lat = []; fails = 0
        if mode == "sync":
            t0 = time.perf_counter()
            for _ in range(n):
                m = Message(topic); m.set_body(body)
                s = time.perf_counter()
                try:
                    p.send_sync(m)
                except Exception:
                    fails += 1
                lat.append(time.perf_counter() - s)
            el = time.perf_counter() - t0
        else:
            inflight = int(sys.argv[5]) if len(sys.argv) > 5 else 64
            sem = threading.Semaphore(inflight); done = threading.Event(); cnt = [0, 0]; lk = threading.Lock()
            def fin(ok):
                with lk:
                    cnt[0] += 1
                    if not ok: cnt[1] += 1
                    if cnt[0] == n: done.set()
                sem.release()
            # Bounded: a send whose callback never comes holds its slot; after STALL_S without a free
            # slot, or past MAX_S, the run stops issuing and reports what it sent ("stalled").
            t0 = time.perf_counter(); issued = 0; stalled = False
            for _ in range(n):
                if not sem.acquire(timeout=STALL_S) or time.perf_counter() - t0 > MAX_S:
                    stalled = True; break
                m = Message(topic); m.set_body(body)
                p.send_async(m, lambda r: fin(True), lambda e: fin(False))
                issued += 1
            if not stalled:
                done.wait(STALL_S)
            el = time.perf_counter() - t0
            with lk:
                completed, fails = cnt[0], cnt[1] + (issued - cnt[0])
            n = completed - cnt[1]
        lat.sort()
        out = {"mode": mode, "n": n, "rate": n / el, "fails": fails}
        if mode == "async":
            out.update(issued=issued, stalled=stalled)
        if lat:
            out["p50_us"] = lat[len(lat) // 2] * 1e6; out["p99_us"] = lat[int(len(lat) * .99)] * 1e6
        print(json.dumps(out)); sys.stdout.flush(); os._exit(0)
    elif mode == "push":
        c = PushConsumer("GID_BENCH_%d" % os.getpid())
        c.set_namesrv_addr(namesrv)
        got = [0]; lk = threading.Lock(); first = [None]; last = [None]
        def cb(msg):
            with lk:
                if first[0] is None: first[0] = time.perf_counter()
                got[0] += 1; last[0] = time.perf_counter()
            return None
        c.subscribe(topic, cb); c.start()
        t0 = time.perf_counter(); dl = t0 + 120
        while got[0] < n and time.perf_counter() < dl:
            time.sleep(0.01)
        el = last[0] - first[0] if got[0] > 1 else float("nan")
        print(json.dumps({"mode": "push", "n": got[0], "rate": got[0] / el, "wall_s": time.perf_counter() - t0})); sys.stdout.flush(); os._exit(0)
main()
