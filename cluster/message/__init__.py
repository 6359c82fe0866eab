"""A message's vocabulary: what its properties are called and how they are written, its ids, its
sysFlag bits, the tag hash and the system topics. Pure and below every other package of ours (it
imports nothing of ours): the store, the broker, the clients, the proxy and the console all speak
it; none of them owns it. Byte layouts on disk stay in ``shm/`` (the CommitLog record in
``shm/commitlog_format.py``, which imports this vocabulary)."""
