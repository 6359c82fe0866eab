"""A message's vocabulary: what its properties are called and how they are written, its ids, its
sysFlag bits, the tag hash, the system topics, and its bytes: the record as stored and delivered
(``record_format.py``) and the batch body a producer sends (``batch_format.py``). Pure and below
every other package of ours (it imports nothing of ours but the byte helpers its layouts are
written with, ``cluster/field_tables.py`` and ``cluster/format_errors.py``): the store, the broker,
the clients, the proxy and the console all speak it; none of them owns it. What only the store's
files hold stays in ``shm/`` (the CommitLog's end-of-file blank in ``shm/commitlog_format.py``, the
ConsumeQueue, the IndexFile), which imports this package."""
