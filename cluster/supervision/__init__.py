"""The supervisor behind ``cluster up`` (SPEC §1), modelled on gunicorn's arbiter. It knows
processes, pipes and signals, nothing of brokers: the roles it starts are the thin entry points in
``cluster/procs/``, and its own process is :mod:`cluster.procs.supervisor`.

Where each part lives:

| module | what |
| --- | --- |
| child_table | the declarative table (ChildSpec), checked as a whole |
| children | each child's running record, and a death in words |
| start_gate | when a child may start (table order, group order) |
| child_launch | fork + exec of one child, its readiness line |
| child_signals | the stop signal and SIGKILL |
| event_wait | the loop's bounded sleep |
| exit_policy | what a death means (restart, halt, stay down, ...) |
| signal_inbox | signal handlers that only enqueue |
| run_state | cluster.json and the data-dir lock |
| arbiter | the ``Supervisor`` loop that ties them together |
| detach | ``cluster up --detach`` |
| lifecycle | the child's side: readiness, parent death, exit codes |
| titles | process titles for ``ps`` |
| errors | what the supervisor raises |

What it does:

* **A declarative table** of :class:`ChildSpec`: name, command, role, fate-sharing
  group, start order, ready check, restart policy. Each child is a fresh
  interpreter (``subprocess`` = fork + exec): no ZeroMQ context or mmap ever
  crosses a fork, and this module creates neither.
* **Start in order**: a child is started only once every child before it is
  ready (the readiness line of :mod:`cluster.supervision.lifecycle`), each within its
  own deadline. During ``start()`` any failure stops what was started and raises
  :class:`BootError` with the child's exit reason and the tail of its log.
* **Watch**: signal handlers only enqueue (plus ``signal.set_wakeup_fd`` to wake
  the loop); one loop (:meth:`Supervisor.step`) dispatches, reaps with
  ``waitpid(-1, WNOHANG)``, explains deaths ("killed by SIGKILL (perhaps out of
  memory?)"), and restarts with exponential backoff.
* **Fate-sharing groups**: a group (one broker: its main process plus flush,
  reput and allocate workers) has a leader, started first. When the leader dies
  the rest of the group is stopped (SIGTERM, SIGKILL after a deadline) and, once
  all are gone, the group restarts in start order, so the broker recovers its
  store with no worker running. A non-leader's death restarts only it.
* **Role changes restart at once**: a child exiting with ``EXIT_ROLE_CHANGED`` after it was ready
  (a replica the controller gave another role, a slave cutting its log back) restarts, also mid-start.
* **Boot errors halt**: a child exiting with ``EXIT_BOOT_ERROR`` before it is
  ready stops the supervisor with the reason instead of a restart loop.
* **Stop** (SIGTERM, SIGINT, or :meth:`Supervisor.stop`): children are stopped
  one at a time in reverse start order, each SIGTERM then SIGKILL after its
  ``stop_timeout_s``. A second stop signal kills everything left at once.
* **No orphans**: every child gets ``PR_SET_PDEATHSIG=SIGTERM`` between fork and
  exec (it survives exec), so a SIGKILLed supervisor still takes its children
  along; children set it again themselves (``lifecycle.install_parent_death_signal``).
  The death signal follows the *thread* that forked: drive the supervisor from
  the thread that lives as long as it (the main thread).
* **Run-state file** ``<data_dir>/cluster.json`` and the data-dir lock: :mod:`cluster.supervision.run_state`.
* **Logs**: each child's stdout and stderr are appended to
  ``<data_dir>/logs/<name>.log``, so a crash leaves evidence.

The loop is steppable (:meth:`Supervisor.step`, :meth:`Supervisor.run_until`), so
tests drive it from the test's own thread without sleeping.
"""
