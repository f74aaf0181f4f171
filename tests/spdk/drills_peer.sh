#!/usr/bin/env bash
# A log mirror on a peer host (docs/spdk.md, "A log mirror on a peer
# host"): the rig of drills.sh with RIG_PEER=1, hhc0's log on the host's
# HDD (hdd0) and on the peer's, reached over NVMe-oF/TCP (rig_peer.sh),
# under the pass load of drills.sh. tests/spdk/run.sh runs them as
# peer_*; alone: `bash tests/spdk/drills_peer.sh [drill...]`.

set -u -o pipefail
# shellcheck source=tests/spdk/drills.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/drills.sh"
# shellcheck source=tests/spdk/takeover_frozen.sh
. "$RIG_REPO/tests/spdk/takeover_frozen.sh"
export RIG_PEER=1

# One line of a mirror's command latencies in hhc0's stats.
peer_latencies() { # device
    drill_stat "'write p50/p99 %(p50)s/%(p99)s us' % d['$1']['write_latency_us'] + ', flush p50/p99 %(p50)s/%(p99)s us' % d['$1']['flush_latency_us']"
}

# The peer back (restarted, or thawed), its mirror attached to hhc0 again
# and re-synced.
peer_rejoin() {
    local deadline=$((SECONDS + 30))
    # The lost controller is deleted first (rig_peer.sh, peer_attach).
    while RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_nvme_get_controllers "{\"name\":\"$RIG_PEER_CTRLR\"}" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { drill_log "the host still has controller $RIG_PEER_CTRLR after 30 s"; return 1; }
        sleep 0.5
    done
    (export RIG_SOCK=$RIG_HOST_SOCK && peer_attach) || return 1
    rig_rpc host bdev_hhc_attach_log -b "$RIG_HHC" -l "$RIG_PEER_BDEV" >/dev/null || return 1
    drill_wait_stat "d['$RIG_PEER_BDEV']['mirror'] == 'healthy'" 300 || return 1
    drill_log "the peer's mirror attached again and re-synced"
}

# The peer killed under load: hhc0 counts its mirror failed and goes on
# with the local one; the peer restarted, its mirror attached again and
# re-synced; then the host's HDD and SSD removed: the replay from the
# peer's mirror alone puts the newest flushed pass on the RAID. Write-back
# is held off, so the passes are on the RAID only through that replay.
drill_peer_mirror_loss() {
    local RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'}
    rig_up hhc && drill_load_start && drill_wait_passes 2 || return 1
    drill_wait_stat "d['$RIG_PEER_BDEV']['mirror'] == 'healthy' and s['gauges']['healthy_mirrors'] == 2" 30 || return 1
    drill_log "hdd0 (local): $(peer_latencies hdd0); $RIG_PEER_BDEV (peer): $(peer_latencies "$RIG_PEER_BDEV")"
    drill_log "hhc0's flushes: $(drill_stat "'p50/p99 %(p50)s/%(p99)s us' % s['flush_latency_us']")"
    peer_kill
    drill_wait_stat 's["gauges"]["healthy_mirrors"] == 1' 60 && drill_wait_passes 2 60 || return 1
    drill_log "peer killed: its mirror failed, $(drill_passes_done) passes done on the local mirror"
    peer_start >/dev/null && peer_rejoin && drill_wait_passes 1 || return 1
    drill_remove hdd0 && drill_wait_passes 1 || return 1
    drill_log "hdd0 dead: the peer's mirror alone takes the flushes"
    drill_remove "$RIG_CACHE" || return 1
    drill_load_stop
    drill_wait_stat 's["state"] in ("recovered", "recovery_failed")' || return 1
    [ "$(drill_stat 's["state"]')" = recovered ] || { drill_stats; return 1; }
    drill_log "replayed from the peer's mirror: $(drill_stat 's["recovery"]')"
    [ "$(drill_stat 's["recovery"]["blocks_replayed"] >= 2048')" = True ] ||
        { drill_log "the replay put less than a region's pass on the RAID: write-back was not held off"; return 1; }
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: the peer killed under load (I/O and flushes went on with the local mirror), restarted," \
        "its mirror re-synced; the host's HDD and SSD removed: the replay over NVMe-oF from the peer alone put the" \
        "newest flushed pass on the RAID"
}

# The peer frozen (SIGSTOP: its connection up, nothing answered) under
# load: hhc0 fails its mirror once a command has waited the engine's
# mirror timeout (10 s) and goes on with the local one; thawed, the
# mirror's late completions are dropped, it is detached and attached again
# and re-synced; the newest flushed pass verifies through hhc0.
drill_peer_mirror_freeze() {
    local t0 waited deadline
    rig_up hhc && drill_load_start && drill_wait_passes 1 || return 1
    peer_freeze
    t0=$SECONDS
    drill_wait_stat 's["gauges"]["healthy_mirrors"] == 1' 60 || { peer_thaw; return 1; }
    waited=$((SECONDS - t0))
    drill_wait_passes 2 60 || { peer_thaw; return 1; }
    drill_log "peer frozen: its mirror failed after ${waited} s; $(drill_passes_done) passes done on the local mirror"
    grep -q "left a command unanswered" "$RIG_HOST_LOG" || { drill_log "the host's log does not say why the mirror failed"; peer_thaw; return 1; }
    peer_thaw
    rig_rpc host bdev_hhc_detach_log -b "$RIG_HHC" -l "$RIG_PEER_BDEV" >/dev/null || return 1
    deadline=$((SECONDS + 30))
    until rig_rpc host bdev_hhc_attach_log -b "$RIG_HHC" -l "$RIG_PEER_BDEV" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { drill_log "the thawed peer's mirror could not be attached again in 30 s"; return 1; }
        sleep 0.5
    done
    drill_wait_stat "d['$RIG_PEER_BDEV']['mirror'] == 'healthy'" 300 && drill_wait_passes 1 || return 1
    drill_load_stop
    drill_verify_hhc || return 1
    drill_log "checked: a frozen peer's mirror failed in ${waited} s under load, passes and flushes went on," \
        "the thawed peer's mirror was attached again and re-synced, the newest flushed pass verifies"
}

HHC=${HHC:-${CARGO_TARGET_DIR:-$RIG_REPO/target}/release/hhc}
PEER_TAKEOVERS=${PEER_TAKEOVERS:-3}

# The host lost for good under load, and the peer's takeover, on a rig of
# RIG_SERVER=tgt (its LUN a file both hosts could reach) with write-back
# held off: the host killed 0-2.5 s into a pass, its SSD and HDD files
# deleted; the peer's mirror, released by the peer's app, replayed onto the
# LUN with `hhc recover` (what the peer does with the volume attached;
# with "skip", not replayed); then the LUN alone is checked.
peer_takeover_round() { # round replay|skip
    local delay replayed
    drill_load_start
    drill_wait_passes 2 || return 1
    delay=$(awk -v r="$RANDOM" 'BEGIN {printf "%.1f", (r % 26) / 10}')
    sleep "$delay"
    host_kill
    drill_load_stop
    if [ -n "${PEER_KEEP_HOST_DISKS:-}" ]; then
        # The host is gone, its disks are not: they come back later.
        mv "$RIG_WORK/ssd0.img" "$RIG_WORK/ssd0.kept" && mv "$RIG_WORK/hdd0.img" "$RIG_WORK/hdd0.kept" || return 1
    else
        rm -f "$RIG_WORK/ssd0.img" "$RIG_WORK/hdd0.img"
    fi
    peer_stop
    if [ "$2" = replay ]; then
        "$HHC" recover --log "$RIG_WORK/peer-hdd.img" --backing "$(tgt_img)" --json >"$RIG_WORK/takeover-$1.json" \
            2>"$RIG_WORK/takeover-$1.log" || { drill_log "takeover $1: hhc recover failed"; cat "$RIG_WORK/takeover-$1.log"; return 1; }
        replayed=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["blocks_replayed"])' "$RIG_WORK/takeover-$1.json")
        drill_log "takeover $1, ${delay} s into a pass: $replayed blocks replayed from the peer's mirror onto the LUN"
        [ "$replayed" -ge 2048 ] || { drill_log "fewer blocks replayed than a region's pass: write-back was not held off"; return 1; }
    fi
    drill_verify_raid
}

peer_takeover_rig() {
    [ "$RIG_SERVER" = tgt ] || { drill_log "the takeover drills need RIG_SERVER=tgt (the LUN is a file)"; return 1; }
    [ -x "$HHC" ] || { drill_log "no hhc binary at $HHC (cargo build --release)"; return 1; }
    rig_up hhc
}

# PEER_TAKEOVERS rounds; after each a fresh hhc0 (new cache and log files,
# as the peer would create it) serves the LUN, and the newest flushed pass
# verifies through it.
drill_peer_takeover() {
    local i RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'}
    peer_takeover_rig || return 1
    for i in $(seq "$PEER_TAKEOVERS"); do
        peer_takeover_round "$i" replay || return 1
        peer_start >/dev/null && host_start hhc >/dev/null && drill_verify_hhc || return 1
    done
    drill_log "checked: $PEER_TAKEOVERS times the host killed under load and its disks deleted; the peer's mirror" \
        "replayed onto the LUN, which alone holds the newest flushed pass; a fresh hhc0 serves it again"
}

# The LUN check must catch a takeover that skips the replay.
drill_peer_takeover_check_can_fail() {
    local RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'}
    peer_takeover_rig || return 1
    if peer_takeover_round 1 skip; then
        drill_log "the LUN holds the newest pass without the replay: the check proves nothing here"
        return 1
    fi
    drill_log "checked: a takeover without the replay loses the flushed pass, and the LUN check catches it"
}

# The peer takes the volume over itself, online (peer_take_over: one
# bdev_hhc_create with takeover replays its mirror onto the LUN and serves
# hhc0, exported where the host had it); the LUN alone and hhc0 on the
# peer hold the newest pass. Says how long after the host's loss hhc0 was
# served again.
drill_peer_takeover_rpc() {
    local RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'} lost served answer replayed
    peer_takeover_rig || return 1
    drill_load_start
    drill_wait_passes 2 || return 1
    sleep "$(awk -v r="$RANDOM" 'BEGIN {printf "%.1f", (r % 26) / 10}')"
    host_kill
    lost=$(date +%s%N)
    drill_load_stop
    rm -f "$RIG_WORK/ssd0.img" "$RIG_WORK/hdd0.img"
    answer=$(peer_take_over) || return 1
    served=$(date +%s%N)
    drill_log "the peer took $RIG_HHC over, served again $(((served - lost) / 1000000)) ms after the host's loss: $answer"
    replayed=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["blocks_replayed"])' "$answer") || return 1
    [ "$replayed" -ge 2048 ] || { drill_log "fewer blocks replayed than a region's pass: write-back was not held off"; return 1; }
    drill_verify_raid && drill_verify_hhc
}

# After a takeover the lost host comes back with its SSD and HDD as they
# were, and the peer exports the replayed mirror again: hhc0 must refuse to
# start warm over its stale cache (docs/format.md, "A replayed log"),
# writing nothing, and the LUN keeps the newest pass the takeover put there.
drill_peer_takeover_return() {
    local RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'} mark writes
    peer_takeover_rig || return 1
    PEER_KEEP_HOST_DISKS=1 peer_takeover_round 1 replay || return 1
    mv "$RIG_WORK/ssd0.kept" "$RIG_WORK/ssd0.img" && mv "$RIG_WORK/hdd0.kept" "$RIG_WORK/hdd0.img" || return 1
    peer_start >/dev/null || return 1
    writes=$(drill_raid_writes)
    mark=$(($(wc -l <"$RIG_HOST_LOG") + 1))
    if host_start hhc >"$RIG_WORK/return.log" 2>&1; then
        drill_log "the host came back and started warm over its stale cache after the takeover"
        return 1
    fi
    if ! tail -n +"$mark" "$RIG_HOST_LOG" | grep -q "was replayed onto the backing device and started over: the cache is stale"; then
        drill_log "the host's start failed, but not for the replayed log:"
        tail -n +"$mark" "$RIG_HOST_LOG" | tail -20
        return 1
    fi
    drill_log "the returning host refused to start warm: $(tail -n +"$mark" "$RIG_HOST_LOG" | grep -m1 -o 'log mirror [0-9]* says[^;]*')"
    [ "$(drill_raid_writes)" = "$writes" ] || { drill_log "the returning host wrote to the LUN"; return 1; }
    drill_verify_raid
}

# A host cut off, not dead, over tgt (takeover_frozen.sh), the target
# admitting initiators by name (RIG_TGT_ACL=names; the peer logs in under
# a name of its own). fence = 1: scripts/tgt-fence.sh unbinds the host's
# name and closes its sessions before the peer takes over.
tgt_takeover() { # fence
    local RIG_TGT_ACL=names RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'}
    peer_takeover_rig && drill_load_start && drill_wait_passes 2 || return 1
    if [ "$1" = 1 ]; then
        takeover_of_frozen_host bash "$RIG_REPO/scripts/tgt-fence.sh" -C "$(tgt_port)" --tid 1 --initiator-name "$RIG_INITIATOR_IQN"
    else
        takeover_of_frozen_host
    fi
}

# Fenced: the thawed host's write-back refused (its session closed, its
# login rejected); the LUN alone holds the peer's pass.
drill_tgt_takeover_fenced() {
    tgt_takeover 1 || return 1
    grep -q "^fenced: " "$RIG_WORK/fence.log" || { drill_log "the fence did not say it fenced"; return 1; }
    takeover_fenced_holds
}

# Without the fence the check must fail: the thawed host's write-back
# puts older passes over the peer's.
drill_tgt_takeover_unfenced_check_can_fail() {
    tgt_takeover 0 && takeover_unfenced_check_fails
}

PEER_DRILLS="drill_peer_mirror_loss drill_peer_mirror_freeze drill_peer_takeover_check_can_fail drill_peer_takeover drill_peer_takeover_return drill_peer_takeover_rpc drill_tgt_takeover_fenced drill_tgt_takeover_unfenced_check_can_fail"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    failed=0
    [ $# -gt 0 ] || read -ra drills <<<"$PEER_DRILLS"
    for drill in "${@:-${drills[@]}}"; do
        drill_run "$drill" || failed=$((failed + 1))
    done
    [ "$failed" = 0 ]
fi
