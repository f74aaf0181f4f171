# shellcheck shell=bash
# The rig's peer host (docs/spdk.md, "A log mirror on a peer host"): a
# second hhc_tgt whose HDD model, over an aio file of its own, is exported
# over NVMe-oF/TCP on 127.0.0.1:RIG_PEER_PORT. With RIG_PEER=1 the host
# attaches it with SPDK's NVMe-oF initiator (bdev_nvme) and gives it to
# hhc0 as the log slot after its local mirrors. Sourced by rig_lib.sh.

RIG_PEER_NQN=nqn.2016-06.io.spdk:hhc-peer
RIG_PEER_CTRLR=peer     # the host's bdev_nvme controller of the peer
RIG_PEER_BDEV=peern1    # the peer's mirror as the host sees it
RIG_PEER_HDD=phdd       # the HDD model on the peer
# The peer's iSCSI initiator: a name of its own, so a target that admits
# initiators by name can fence the host alone (scripts/tgt-fence.sh).
RIG_PEER_INITIATOR_IQN=iqn.2016-06.io.spdk:hhc-peer

# The peer's hhc_tgt with its mirror exported (its file survives a kill
# and a restart, as a disk would).
peer_start() {
    rig_running peer && { rig_log "peer already running (pid $(rig_pid peer))"; return 0; }
    rm -f "$RIG_PEER_SOCK"
    rig_spawn peer "$RIG_PEER_LOG" "$RIG_WORK" env LD_PRELOAD="$RIG_MODEL_MODULE" "$RIG_TGT" --no-huge -s "$RIG_PEER_MEM_MB" -m "$RIG_PEER_MASK" \
        -r "$RIG_PEER_SOCK" --disable-cpumask-locks
    rig_wait_rpc peer "$RIG_PEER_SOCK" "$RIG_PEER_LOG" || return 1
    local RIG_SOCK=$RIG_PEER_SOCK
    rig_aio "${RIG_PEER_HDD}_base" "$RIG_WORK/peer-hdd.img" "$RIG_HDD_MB" 512 && make_hdd "$RIG_PEER_HDD" "${RIG_PEER_HDD}_base" &&
        rig_nvmf_export "$RIG_PEER_NQN" "$RIG_PEER_HDD" "$RIG_PEER_PORT" HHCPEER "HHC peer mirror" ||
        { rig_log "peer: its mirror could not be exported"; return 1; }
    rig_log "peer: $RIG_PEER_HDD on NVMe-oF/TCP 127.0.0.1:$RIG_PEER_PORT $RIG_PEER_NQN"
}
peer_stop() { rig_stop peer TERM; }

# On the peer, the host gone for good: its mirror out of the NVMe-oF export
# (which claims it), the backing over iSCSI, a fresh cache, then one
# bdev_hhc_create with takeover, which replays the mirror onto the backing,
# formats and serves hhc0; hhc0 exported where the host had it. Prints the
# create call's answer (what was replayed).
peer_take_over() {
    local RIG_SOCK=$RIG_PEER_SOCK answer
    rig_call nvmf_delete_subsystem "{\"nqn\":\"$RIG_PEER_NQN\"}" >/dev/null &&
        server_backing_create "$RIG_BACKING" "$RIG_PEER_INITIATOR_IQN" &&
        rig_aio peer_ssd_base "$RIG_WORK/peer-ssd.img" "$RIG_SSD_MB" 4096 && make_ssd peer_ssd peer_ssd_base ||
        { rig_log "peer: the devices for the takeover could not be set up"; return 1; }
    # The call answers once the log is replayed: a large log takes long.
    answer=$(RIG_CALL_TIMEOUT_S=600 rig_call bdev_hhc_create "$(rig_hhc_params peer_ssd "\"$RIG_PEER_HDD\"" "$RIG_POLICY" '"takeover":true')") ||
        { rig_log "peer: bdev_hhc_create with takeover failed"; return 1; }
    rig_nvmf_subsystem "$RIG_NQN" "$RIG_HHC" "$RIG_NVMF_PORT" HHC0 "HHC rig" || { rig_log "peer: exporting $RIG_HHC failed"; return 1; }
    echo "$answer"
}
peer_kill() { rig_stop peer KILL; }
peer_running() { rig_running peer; }
peer_freeze() { kill -STOP "$(rig_pid peer)"; }
peer_thaw() { kill -CONT "$(rig_pid peer)"; }

# On the host (RIG_SOCK), the bdev_nvme options, once, before any
# controller: FLUSH passed to the peer (a mirror's barrier waits for it).
# No command timeout (`timeout_us`): on a TCP controller SPDK's timeout
# handler reads the controller's status with a synchronous admin command,
# which blocks the host's thread, hhc0's included, for 30 s at a time while
# the peer hangs; hhc0 fails a mirror that leaves a command unanswered for
# 10 s itself (docs/spdk.md, "A log mirror on a peer host").
peer_nvme_options() {
    rig_call bdev_nvme_set_options "{\"enable_flush\":true${RIG_PEER_NVME_OPTS:+,$RIG_PEER_NVME_OPTS}}" >/dev/null
}

# On the host (RIG_SOCK): the peer's mirror as bdev RIG_PEER_BDEV. While
# the controller is being reconnected its commands fail after 1 s
# (fast_io_fail_timeout_sec: hhc0 counts the mirror failed and goes on
# with the others); after 2 s the controller is deleted and its bdev with
# it, which frees hhc0's slot for the mirror to be attached again (with
# ctrlr_loss_timeout_sec 0 a failed controller is reset again and again
# and never deleted).
peer_attach() {
    rig_call bdev_nvme_attach_controller "{\"name\":\"$RIG_PEER_CTRLR\",\"trtype\":\"tcp\",\"adrfam\":\"ipv4\",\"traddr\":\"127.0.0.1\",\"trsvcid\":\"$RIG_PEER_PORT\",\"subnqn\":\"$RIG_PEER_NQN\",\"ctrlr_loss_timeout_sec\":2,\"reconnect_delay_sec\":1,\"fast_io_fail_timeout_sec\":1}" \
        >/dev/null || { rig_log "host: the peer's mirror could not be attached over NVMe-oF"; return 1; }
    rig_log "host: the peer's mirror as $RIG_PEER_BDEV (NVMe-oF/TCP 127.0.0.1:$RIG_PEER_PORT)"
}
