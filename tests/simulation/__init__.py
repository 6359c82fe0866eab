"""A seeded simulation of a broker in one process (TigerBeetle's VOPR is the model): one
``random.Random(seed)`` steps a broker, a pull consumer, a pop consumer and a producer through
sends, pulls, pops, acks, flushes, crashes, power cuts and a full or slow disk on one ManualClock,
and checks what the Spark checker checks after every fault and at the end. ``python -m
tests.simulation --seed N`` replays one seed exactly; ``tests/simulation/test_simulation.py`` runs
a few hundred in CI."""
