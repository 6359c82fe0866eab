"""A broker's boot step, before its service exists: recover the store and settle the role.

Recovery (the CommitLog's true end, ConsumeQueues and IndexFiles made consistent with it)
and, in controller mode, the blocking negotiation of this replica's role (with a slave's
log cut back to where it left its master's) both happen here. The service is then built
from what boot returns and has no side effects of its own, so a test can build one in
process over a store directory without forking.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketbox.cluster.broker.controller_client import ControllerClient, effective_config
from rocketbox.cluster.config import BrokerConfig
from rocketbox.cluster.live_settings import read_live, with_values
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.shm import durable
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.epochs import EpochCache
from rocketbox.cluster.shm.paths import control_path, truncate_marker_path
from rocketbox.cluster.shm.recovery import RecoveryReport
from rocketbox.cluster.shm.store import MessageStore
from rocketbox.cluster.zmq_transport import RpcClient

log = logging.getLogger(__name__)


@dataclass
class BootedBroker:
    """What a broker serves from: its settings (with the controller's role, if any), its
    recovered store and control block, its epoch file and its controller link."""

    cfg: BrokerConfig
    control: ControlBlock
    store: MessageStore
    recovery: RecoveryReport
    epochs: EpochCache
    namesrv_client: RpcClient
    controller: ControllerClient | None


def boot(cfg: BrokerConfig) -> BootedBroker:
    store_dir = cfg.store.store_dir
    cfg = with_values(cfg, read_live(store_dir))   # what updateBrokerConfig changed stays changed
    durable.makedirs(store_dir)
    control = ControlBlock(control_path(store_dir))
    store = MessageStore(cfg.store, control, store_host=pack_host(cfg.host, cfg.store_host_port))
    recovery = store.recover()
    log.info("recovery: %s", recovery)
    epochs = EpochCache(store_dir)
    recovery = _truncate_as_the_master_asked(store_dir, store, epochs, recovery)
    if not cfg.controller_mode and not cfg.is_slave and not recovery.clean_shutdown:
        # A new term after a crash: bytes a power cut took from this master may live on in a slave,
        # and what this master writes there now differs; the epochs tell the two apart (broker/ha.py).
        epochs.begin(epochs.last_epoch + 1, store.commitlog.write_pos)
    namesrv_client = RpcClient(default_timeout_ms=3000)
    controller = None
    if cfg.controller_mode:
        controller = ControllerClient(cfg, store, epochs, namesrv_client)
        cfg, recovery = _take_role_from_controller(cfg, controller, store, epochs, recovery)
    return BootedBroker(cfg, control, store, recovery, epochs, namesrv_client, controller)


def _truncate_as_the_master_asked(store_dir: str, store: MessageStore, epochs: EpochCache,
                                  recovery: RecoveryReport) -> RecoveryReport:
    """A slave whose master's log was shorter (broker/ha.py, TRUNCATE) left a note before restarting."""
    marker = truncate_marker_path(store_dir)
    try:
        with open(marker) as f:
            text = f.read()
    except FileNotFoundError:
        return recovery
    keep = int(text) if text.isdigit() else None   # a torn note: the master asks again
    if keep is not None and keep < store.commitlog.write_pos:
        log.warning("cutting this slave's log back to its master's end, %d (%d bytes past it)",
                    keep, store.commitlog.write_pos - keep)
        recovery = store.recover(truncate_to=keep)
        log.info("recovery (truncation): %s", recovery)
        epochs.truncate(store.commitlog.write_pos)
    durable.unlink(marker)
    return recovery


def _take_role_from_controller(cfg: BrokerConfig, controller: ControllerClient, store: MessageStore,
                               epochs: EpochCache, recovery: RecoveryReport) -> tuple[BrokerConfig, RecoveryReport]:
    """Controller mode: boot as the role the controller names (see controller_client.py)."""
    view, keep = controller.resolve()
    role_cfg = effective_config(cfg, view, controller.replica_id)
    if not role_cfg.is_slave:
        epochs.begin(controller.epoch, store.commitlog.write_pos)
        return role_cfg, recovery
    end = store.commitlog.write_pos
    if keep < end:
        log.warning("this replica's log left the master's at %d: dropping %d bytes past it", keep, end - keep)
        recovery = store.recover(truncate_to=keep)
        log.info("recovery (truncation): %s", recovery)
        epochs.truncate(store.commitlog.write_pos)
    return role_cfg, recovery
