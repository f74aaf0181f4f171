#!/usr/bin/env bash
# HHC over Ceph RBD (docs/ceph.md): the rig with RIG_SERVER=ceph (the
# one-node cluster of tests/ceph/cluster.sh; hhc0's backing is bdev_rbd),
# every policy, a save_config round trip, and the fault drills over Ceph.
# Each check uses the pass scheme of tests/spdk/drills.sh (the newest done
# pass, covered by a flush, must verify in full, every block its own).
# tests/spdk/run.sh runs them as ceph_*; alone:
# `bash tests/spdk/drills_ceph.sh [check...]` (a cluster already running in
# CEPH_DIR is shared, else each rig brings one up and down).

set -u -o pipefail
# (or tgt-rbd: the same image behind an iSCSI gateway)
[ "${RIG_SERVER:-}" = tgt-rbd ] || RIG_SERVER=ceph
# shellcheck source=tests/spdk/drills.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/drills.sh"

CEPH_HANG_S=${CEPH_HANG_S:-15}           # how long the OSD stays stopped (client op timeout: CEPH_CLIENT_OP_TIMEOUT, 5 s)
CEPH_MON_DOWN_S=${CEPH_MON_DOWN_S:-3}    # how long the mon is away in ceph_mon_restart
CEPH_POLICY_WRAPS=${CEPH_POLICY_WRAPS:-2}   # log wraps policy hhc must reach

# The RBD bdev's latency as SPDK's bdev layer measured it (bdev_get_iostat):
# one line, and fails unless it completed writes and flushes.
ceph_backing_iostat() {
    RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_get_iostat "{\"name\":\"$RIG_BACKING\"}" | python3 -c '
import json, sys
a = json.loads(sys.stdin.readline())
b, hz = a["bdevs"][0], a["tick_rate"]
us = lambda t, n: t * 1e6 / hz / n if n else 0
print("%s (bdev_get_iostat): %d writes avg %.0f us, max %.0f us; %d reads avg %.0f us" % (b["name"],
      b["num_write_ops"], us(b["write_latency_ticks"], b["num_write_ops"]), us(b["max_write_latency_ticks"], 1),
      b["num_read_ops"], us(b["read_latency_ticks"], b["num_read_ops"])))
sys.exit(0 if b["num_write_ops"] > 0 else 1)'
}

# One policy over RBD: passes with flushes until the log has wrapped
# CEPH_POLICY_WRAPS times (policy hhc; the others run 2 passes, no log),
# the newest verifies through hhc0, backing and stats look right, every
# dirty block is written back, and with the host killed the image alone
# holds the newest pass.
ceph_policy() { # policy
    local policy=$1 i wraps max=12
    [ "$policy" = hhc ] || max=2
    # A 16 MiB log: each 8 MiB pass (fsync every 32 writes) fills half of it.
    RIG_HDD_MB=16 rig_up "$policy" || return 1
    for i in $(seq "$max"); do
        # shellcheck disable=SC2046
        nvmf_fio --rw=randwrite $(drill_pass_args "$((i - 1))") --verify=crc32c --do_verify=0 --fsync=32 --end_fsync=1 \
            >>"$RIG_WORK/passes.log" 2>&1 || { drill_log "pass $i failed"; tail -5 "$RIG_WORK/passes.log"; return 1; }
        echo $((i - 1)) >>"$DRILL_PASSES_FILE"
        wraps=$(drill_stat 's["counters"]["log_wraps"]')
        [ "$policy" != hhc ] || [ "$wraps" -lt "$CEPH_POLICY_WRAPS" ] || break
    done
    drill_log "policy $policy: $i passes of ${DRILL_REGION_MB} MiB, log wraps $wraps"
    if [ "$policy" = hhc ] && [ "$wraps" -lt "$CEPH_POLICY_WRAPS" ]; then
        drill_log "the log wrapped only $wraps times in $i passes"
        return 1
    fi
    drill_verify_hhc || return 1
    drill_log "$(drill_stat '"hhc0: writes %d, flushes %d, writebacks %d, backing_errors %d, flush p50/p99 %d/%d us; backing %s" % (s["counters"]["writes"], s["counters"]["flushes"], s["counters"]["writebacks"], s["counters"]["backing_errors"], s["flush_latency_us"]["p50"], s["flush_latency_us"]["p99"], [x["name"] + " " + x["health"] for x in s["devices"] if x["role"] == "backing"][0])')"
    [ "$(drill_stat '[(x["name"], x["health"]) for x in s["devices"] if x["role"] == "backing"] == [("rbd0", "ok")] and s["counters"]["backing_errors"] == 0')" = True ] ||
        { drill_log "the backing is not rbd0 in health, or had errors"; drill_stats | cut -c1-900; return 1; }
    ceph_backing_iostat || { drill_log "no write reached $RIG_BACKING"; return 1; }
    if [ "$policy" != passthrough ]; then
        rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
            drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 120 || return 1
    fi
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: policy $policy over bdev_rbd: flushed passes (log wraps $wraps), the newest verifies through hhc0" \
        "and, written back, on the RBD image alone"
}

# save_config of the host, a restart from it: hhc0 comes back warm over a
# bdev_rbd the saved config re-creates, exported again, and the newest pass
# verifies.
ceph_save_config() {
    local mark
    rig_up hhc && drill_load_start && drill_wait_passes 2 || return 1
    drill_load_stop
    timeout 60 "$SPDK_RPC_CMD" -s "$RIG_HOST_SOCK" save_config >"$RIG_WORK/saved.json" || return 1
    python3 - "$RIG_WORK/saved.json" <<'PY' || return 1
import json, sys
calls = {c["method"]: c.get("params") for s in json.load(open(sys.argv[1]))["subsystems"] for c in s.get("config") or []}
rbd, hhc = calls["bdev_rbd_create"], calls["bdev_hhc_create"]
print("saved: bdev_rbd_create %s/%s config %s; bdev_hhc_create backing %s" % (rbd["pool_name"], rbd["rbd_name"],
      sorted(rbd["config"]), hhc["backing"]))
assert rbd["name"] == "rbd0" and "mon_host" in rbd["config"] and hhc["backing"] == "rbd0", (rbd, hhc)
PY
    host_stop
    mark=$(wc -l <"$RIG_HOST_LOG")
    rm -f "$RIG_HOST_SOCK"
    rig_spawn host "$RIG_HOST_LOG" "$RIG_WORK" env LD_PRELOAD="$RIG_MODEL_MODULE" "$RIG_TGT" --no-huge -s "$RIG_HOST_MEM_MB" -m "$RIG_HOST_MASK" \
        -r "$RIG_HOST_SOCK" --disable-cpumask-locks --json "$RIG_WORK/saved.json"
    rig_wait_rpc host "$RIG_HOST_SOCK" "$RIG_HOST_LOG" || return 1
    for _ in $(seq 300); do drill_stats >/dev/null 2>&1 && break; sleep 0.1; done
    tail -n +"$mark" "$RIG_HOST_LOG" | grep -q "warm start from cache bdev $RIG_CACHE" ||
        { drill_log "hhc0 did not come back warm from the saved config"; tail -n +"$mark" "$RIG_HOST_LOG" | tail -20; return 1; }
    drill_log "restarted from save_config: hhc0 warm over $(drill_stat '[x["name"] for x in s["devices"] if x["role"] == "backing"][0]')"
    drill_verify_hhc || return 1
    drill_log "checked: save_config over bdev_rbd, restart from it: hhc0 warm, exported, the newest flushed pass verifies"
}

# The OSD stopped (SIGSTOP) under load past librados' op timeout: write-
# backs fail (backing errors) and their blocks stay dirty; no log entry is
# revoked (a revoke follows a write-back run whose backing FLUSH
# succeeded); passes and their flushes go on; after SIGCONT write-back
# resumes, and after flush_all the image alone holds the newest pass.
# Not checked: `writebacks` standing still. librbd's write-back cache
# (rbd cache, on by default) completes block writes with the OSD stopped,
# so the counter rises; the run's backing FLUSH then fails and the blocks
# stay dirty.
ceph_osd_hang() {
    local e0 we0 wb0 rv0 d0 t0
    rig_up hhc && drill_load_start && drill_wait_passes 1 || return 1
    e0=$(drill_stat 's["counters"]["backing_errors"]')
    we0=$(drill_stat 's["counters"]["writeback_errors"]')
    server_freeze || return 1
    t0=$SECONDS
    # Writes the OSD finished just before it stopped may still complete.
    sleep 1
    wb0=$(drill_stat 's["counters"]["writebacks"]')
    rv0=$(drill_stat 's["counters"]["revokes"]')
    d0=$(drill_stat 's["gauges"]["dirty_blocks"]')
    drill_log "OSD stopped (SIGSTOP), client op timeout ${CEPH_CLIENT_OP_TIMEOUT} s, held ${CEPH_HANG_S} s;" \
        "dirty blocks $d0, written back so far $wb0, log entries revoked $rv0"
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null || return 1
    drill_wait_stat "s['counters']['backing_errors'] > $e0 and s['counters']['writeback_errors'] > $we0" \
        $((CEPH_CLIENT_OP_TIMEOUT * 3)) || { drill_log "no backing error within 3 x the op timeout"; return 1; }
    drill_log "backing errors after $((SECONDS - t0)) s of hang"
    drill_wait_passes 1 "$CEPH_HANG_S" || { drill_log "no pass completed while the OSD was stopped"; return 1; }
    [ $((SECONDS - t0)) -ge "$CEPH_HANG_S" ] || sleep $((CEPH_HANG_S - (SECONDS - t0)))
    [ "$(awk '{print $3}' "/proc/$(ceph_pid osd.0)/stat" 2>/dev/null)" = T ] || { drill_log "the OSD did not stay stopped"; return 1; }
    drill_stats >"$RIG_WORK/hang-stats.json"
    drill_log "after $((SECONDS - t0)) s: $(drill_stat_of "$RIG_WORK/hang-stats.json" '"backing_errors %d, writeback_errors %d, writebacks %d, revokes %d, dirty blocks %d" % (s["counters"]["backing_errors"], s["counters"]["writeback_errors"], s["counters"]["writebacks"], s["counters"]["revokes"], s["gauges"]["dirty_blocks"])'); $(drill_passes_done) passes done"
    server_thaw || return 1
    [ "$(drill_stat_of "$RIG_WORK/hang-stats.json" "s['counters']['revokes'] == $rv0 and s['gauges']['dirty_blocks'] >= $d0 > 0")" = True ] ||
        { drill_log "log entries revoked, or dirty blocks dropped, while the OSD was stopped"; return 1; }
    drill_wait_stat "s['counters']['writebacks'] > $wb0" 60 || { drill_log "write-back did not resume after SIGCONT"; return 1; }
    drill_log "OSD resumed (SIGCONT); write-back resumed ($(drill_stat 's["counters"]["writebacks"]') blocks)"
    # (a PG whose read lease ran out while the OSD was stopped can stay
    # laggy, every op to it parked: tests/ceph/cluster.sh's grace)
    ceph_wait_clean 60 || { drill_log "Ceph: a PG not active+clean 60 s after SIGCONT"; return 1; }
    drill_wait_passes 1 && drill_load_stop || return 1
    drill_verify_hhc || return 1
    drill_wait_stat 'not s["flush_all_in_progress"]' 300 || return 1
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
        drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 300 || return 1
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: the OSD stopped ${CEPH_HANG_S} s under load past the ${CEPH_CLIENT_OP_TIMEOUT} s op timeout: backing errors," \
        "no log entry revoked, no dirty block dropped, passes and flushes went on; after SIGCONT write-back resumed; after flush_all" \
        "the RBD image alone holds the newest pass"
}

# The mon stopped and started again under load: I/O to the OSD goes on,
# passes and write-back go on, nothing is lost.
ceph_mon_restart() {
    local wb0
    rig_up hhc && drill_load_start && drill_wait_passes 1 || return 1
    ceph_stop_daemon mon.a || return 1
    drill_log "mon stopped"
    sleep "$CEPH_MON_DOWN_S"
    ceph_spawn mon.a ceph-mon a && ceph_wait_osd_up 60 || return 1
    drill_log "mon back after $CEPH_MON_DOWN_S s"
    wb0=$(drill_stat 's["counters"]["writebacks"]')
    drill_wait_passes 2 && drill_wait_stat "s['counters']['writebacks'] > $wb0" 60 || return 1
    drill_load_stop
    drill_verify_hhc || return 1
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
        drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 120 || return 1
    drill_log "backing errors: $(drill_stat 's["counters"]["backing_errors"]')"
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: the mon restarted under load; passes and write-back went on; the RBD image alone holds the newest pass"
}

# SSD death under load with the flushed pass still dirty (write-back held
# off: threshold 100 %, no idle write-back; RBD takes write-back so fast
# that otherwise nothing is left to replay): the replay from the log puts
# it on the image, which alone then holds the newest pass.
ceph_ssd_death() {
    RIG_HHC_ARGS='"dirty_threshold":100,"idle_after_ms":600000' rig_up hhc && drill_load_start && drill_wait_passes 2 || return 1
    drill_log "dirty blocks before the cache goes: $(drill_stat 's["gauges"]["dirty_blocks"]')"
    drill_remove "$RIG_CACHE" || return 1
    drill_load_stop
    drill_wait_stat 's["state"] in ("recovered", "recovery_failed")' || return 1
    [ "$(drill_stat 's["state"]')" = recovered ] || { drill_stats; return 1; }
    drill_log "replayed: $(drill_stat 's["recovery"]')"
    [ "$(drill_stat 's["recovery"]["blocks_replayed"] > 0')" = True ] || { drill_log "nothing was replayed: the drill tested nothing"; return 1; }
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: cache bdev removed under load with the flushed passes dirty, the log replayed onto the RBD image," \
        "which alone holds the newest flushed pass"
}

CEPH_CHECKS="ceph_policy_passthrough ceph_policy_wt ceph_policy_wb ceph_policy_wb-flush ceph_policy_wb-ordered ceph_policy_hhc ceph_save_config drill_check_can_fail drill_stale_check_can_fail drill_power_loss ceph_ssd_death drill_server_restart ceph_osd_hang ceph_mon_restart"

# ceph_policy_POLICY NAME runs ceph_policy POLICY.
ceph_run() { # check
    case $1 in
        ceph_policy_*) drill_run_args ceph_policy "${1#ceph_policy_}" ;;
        *) drill_run "$1" ;;
    esac
}
drill_run_args() { # function args...
    local rc
    rm -f "$DRILL_PASSES_FILE"
    (
        trap 'drill_load_stop; KEEP=${KEEP:-} rig_down >/dev/null 2>&1' EXIT
        "$@"
    )
    rc=$?
    if [ "$rc" = 0 ]; then echo "[drill] PASS $*"; else echo "[drill] FAIL $*"; fi
    return "$rc"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    failed=0
    [ $# -gt 0 ] || read -ra checks <<<"$CEPH_CHECKS"
    for check in "${@:-${checks[@]}}"; do
        ceph_run "$check" || failed=$((failed + 1))
    done
    [ "$failed" = 0 ]
fi
