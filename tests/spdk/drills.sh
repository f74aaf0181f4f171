#!/usr/bin/env bash
# Fault drills of the topology rig (docs/spdk.md, "Topology rig"): power
# loss, SSD death, HDD death with a replacement mirror, a storage-server
# restart and the loss of both hosts, each under fio load through NVMe-oF.
# Each drill prints PASS/FAIL and what it checked. tests/spdk/run.sh runs
# them (ONLY=drill_...); alone: `bash tests/spdk/drills.sh [drill...]`.
#
# The load is a stream of passes: pass k writes one of two 8 MiB regions of
# hhc0 (k even: the first, k odd: the second) with fio's crc32c pattern of
# seed DRILL_SEED0+k, FLUSHes every 32 writes and at its end, and counts as
# done once fio exits 0. The newest done pass is then covered by a
# completed flush and only the pass after it (in the other region) has
# touched hhc0 since: after any fault, its region must verify in full
# (every block its own: nothing lost, torn or foreign).

set -u -o pipefail
DRILLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/spdk/rig_lib.sh
. "$DRILLS_DIR/rig_lib.sh"

DRILL_SEED0=${DRILL_SEED0:-1000}
DRILL_REGION_MB=${DRILL_REGION_MB:-8}
DRILL_POWER_LOSSES=${DRILL_POWER_LOSSES:-20}
DRILL_HANG_TIMEOUT_S=${DRILL_HANG_TIMEOUT_S:-5}   # bdev_iscsi timeout_sec in drill_server_hang
DRILL_HANG_S=${DRILL_HANG_S:-20}                 # how long the server stays stopped
DRILL_HANG_RESUME_S=${DRILL_HANG_RESUME_S:-30}   # how long write-back may take to resume after SIGCONT
DRILL_RAID_LEVEL=${DRILL_RAID_LEVEL:-raid1}       # drill_raid_member_death's RAID (raid0 must fail it)
DRILL_PASSES_FILE=$RIG_WORK/passes.done
DRILL_LOOP_PID=

drill_log() { echo "[drill] $*"; }

# The fio options of pass k (seed and region).
drill_pass_args() { # k
    local k=$1
    echo "--offset=$(((k % 2) * DRILL_REGION_MB))m --size=${DRILL_REGION_MB}m --randseed=$((DRILL_SEED0 + k))"
}

# The fio options that verify pass k. crc32c alone passes any intact fio
# block at its offset, an older pass's too; the header's seed tells them
# apart, and --verify_only turns that check off unless asked for.
drill_verify_args() { # k
    echo "--rw=randwrite $(drill_pass_args "$1") --verify=crc32c --verify_only=1 --verify_fatal=1 --verify_header_seed=1"
}

# Passes k, k+1, ... through NVMe-oF until fio fails (the fault); each
# done pass is appended to DRILL_PASSES_FILE.
drill_pass_loop() {
    local k
    k=$(drill_next_pass)
    while [ ! -e "$RIG_WORK/load.stop" ]; do
        # shellcheck disable=SC2046
        nvmf_fio --rw=randwrite $(drill_pass_args "$k") --verify=crc32c --do_verify=0 --fsync=32 --end_fsync=1 \
            >>"$RIG_WORK/passes.log" 2>&1 || return 0
        # fio stopped by SIGTERM can exit 0: that pass is not done.
        [ ! -e "$RIG_WORK/load.stop" ] || return 0
        echo "$k" >>"$DRILL_PASSES_FILE"
        k=$((k + 1))
    done
}

drill_last_pass() { tail -1 "$DRILL_PASSES_FILE" 2>/dev/null; }
drill_next_pass() { local last; last=$(drill_last_pass); echo $((${last:--1} + 1)); }
drill_passes_done() { if [ -e "$DRILL_PASSES_FILE" ]; then wc -l <"$DRILL_PASSES_FILE"; else echo 0; fi; }

drill_load_start() {
    drill_pass_loop &
    DRILL_LOOP_PID=$!
}

drill_load_stop() {
    [ -n "$DRILL_LOOP_PID" ] || return 0
    touch "$RIG_WORK/load.stop"
    # Again while it lives: a fio started just after the first pkill.
    while kill -0 "$DRILL_LOOP_PID" 2>/dev/null; do
        pkill -P "$DRILL_LOOP_PID" 2>/dev/null
        sleep 0.2
    done
    wait "$DRILL_LOOP_PID" 2>/dev/null
    rm -f "$RIG_WORK/load.stop"
    DRILL_LOOP_PID=
}

# Waits until at least N more passes are done than now (default 1).
drill_wait_passes() { # [count] [timeout-s]
    local want=$(($(drill_passes_done) + ${1:-1})) deadline=$((SECONDS + ${2:-120}))
    while [ "$(drill_passes_done)" -lt "$want" ]; do
        [ $SECONDS -lt $deadline ] || { drill_log "no pass done in ${2:-120} s"; return 1; }
        sleep 0.2
    done
}

# The newest done pass verifies through NVMe-oF (hhc0 on the host).
drill_verify_hhc() {
    local k
    k=$(drill_last_pass)
    [ -n "$k" ] || { drill_log "no pass was ever done"; return 1; }
    # shellcheck disable=SC2046
    nvmf_fio $(drill_verify_args "$k") \
        >"$RIG_WORK/verify.log" 2>&1 || { drill_log "pass $k does not verify through hhc0"; tail -20 "$RIG_WORK/verify.log"; return 1; }
    drill_log "pass $k verifies through hhc0"
}

# ---- looking into the host ----

# bdev_hhc_get_stats of hhc0 as one JSON line.
drill_stats() { RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_hhc_get_stats "{\"name\":\"$RIG_HHC\"}"; }

# A value of hhc0's stats: a Python expression over `s`, e.g. 's["state"]'.
drill_stat() { # expression
    drill_stats | drill_stat_of /dev/stdin "$1"
}

# The same of stats saved in a file (one JSON line).
drill_stat_of() { # file expression
    python3 -c "import json, sys
s = json.loads(open(sys.argv[1]).readline())
d = {x['name']: x for x in s.get('devices', [])}
print($2)" "$1"
}

# Waits until a stats expression (over s, and d: the devices by name)
# prints True.
drill_wait_stat() { # expression [timeout-s]
    local deadline=$((SECONDS + ${2:-120}))
    until [ "$(drill_stat "$1" 2>/dev/null)" = True ]; do
        [ $SECONDS -lt $deadline ] || { drill_log "timed out waiting for: $1"; drill_stats | cut -c1-600; return 1; }
        sleep 0.2
    done
}

# Removes a device bdev of the host (hot-remove, as a dead disk).
drill_remove() { # name
    local kind
    kind=$(awk -v n="$1" '$1 == n {print $2}' "$RIG_WORK/devices")
    case $kind in
        model) rig_rpc host bdev_hhc_model_delete "$1" >/dev/null ;;
        delay) rig_rpc host bdev_delay_delete "$1" >/dev/null ;;
        *) drill_log "no device $1"; return 1 ;;
    esac
    drill_log "removed $1 (a dead disk)"
}

# The newest done pass verifies on the server's backing alone, read by
# server_fio (the spdk kind: a fresh iSCSI session; tgt: its LUN's file;
# ceph: a bdev_rbd of its own); the host is down by then.
drill_verify_raid() {
    local k
    k=$(drill_last_pass)
    # shellcheck disable=SC2046
    server_fio $(drill_verify_args "$k") \
        >"$RIG_WORK/verify-raid.log" 2>&1 ||
        { drill_log "pass $k does not verify on the backing alone"; tail -20 "$RIG_WORK/verify-raid.log"; return 1; }
    drill_log "pass $k verifies on the backing alone ($RIG_SERVER server, read without the host)"
}

# Writes the server's RAID bdev has completed (bdev_get_iostat), or its
# LUN (a kind with server_writes: tgt).
drill_raid_writes() {
    if declare -F server_writes >/dev/null; then server_writes; return; fi
    RIG_SOCK=$RIG_SERVER_SOCK rig_call bdev_get_iostat "{\"name\":\"$RIG_RAID\"}" |
        python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["bdevs"][0]["num_write_ops"])'
}

# ---- the drills ----

# Power loss: kill -9 of the host at random moments under load, again and
# again (each round has a pass of its own done first); each restart comes
# back warm and the newest pass verifies.
drill_power_loss() {
    local i delay warm
    rig_up hhc || return 1
    for i in $(seq "$DRILL_POWER_LOSSES"); do
        drill_load_start
        # A pass flushed in this round, then the kill 0-2.5 s into the next
        # one: mid-write, mid-flush, or while its fio starts.
        drill_wait_passes 1 || return 1
        delay=$(awk -v r="$RANDOM" 'BEGIN {printf "%.1f", (r % 26) / 10}')
        sleep "$delay"
        host_kill
        drill_load_stop
        host_start hhc >>"$RIG_WORK/restarts.log" 2>&1 || { drill_log "restart $i failed"; tail -5 "$RIG_HOST_LOG"; return 1; }
        drill_verify_hhc || return 1
        drill_log "power loss $i of $DRILL_POWER_LOSSES after ${delay} s: $(drill_passes_done) passes done so far"
    done
    warm=$(grep -c "host: $RIG_HHC warm" "$RIG_WORK/restarts.log")
    [ "$warm" = "$DRILL_POWER_LOSSES" ] || { drill_log "only $warm of $DRILL_POWER_LOSSES restarts were warm"; return 1; }
    drill_log "checked: $DRILL_POWER_LOSSES kill -9 of the host under fio load, each followed by a warm restart" \
        "and the newest flushed pass verifying in full ($(drill_passes_done) passes)"
}

# SSD death under load: the cache bdev goes; HHC replays its log onto the
# RAID; the RAID alone holds the newest flushed pass.
drill_ssd_death() {
    rig_up hhc && drill_load_start && drill_wait_passes 2 || return 1
    drill_remove "$RIG_CACHE" || return 1
    drill_load_stop
    drill_wait_stat 's["state"] in ("recovered", "recovery_failed")' || return 1
    [ "$(drill_stat 's["state"]')" = recovered ] || { drill_stats; return 1; }
    drill_log "replayed: $(drill_stat 's["recovery"]')"
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: cache bdev removed under load, the log replayed onto the iSCSI RAID, which alone holds the newest flushed pass"
}

# HDD death under load: one of two log mirrors goes; passes (and their
# flushes) go on; a new mirror is attached and re-synced; then the other
# old mirror and the SSD go: the replay from the new mirror alone puts the
# newest flushed pass on the RAID.
drill_hdd_death() {
    RIG_HDDS=2 rig_up hhc && drill_load_start && drill_wait_passes 1 || return 1
    drill_remove hdd1 && drill_wait_stat 's["gauges"]["healthy_mirrors"] == 1' && drill_wait_passes 2 || return 1
    drill_log "hdd1 dead: degraded, $(drill_passes_done) passes done"
    (export RIG_SOCK=$RIG_HOST_SOCK && rig_aio hdd2_base "$RIG_WORK/hdd2.img" "$RIG_HDD_MB" 512 && make_hdd hdd2 hdd2_base) ||
        return 1
    rig_rpc host bdev_hhc_attach_log -b "$RIG_HHC" -l hdd2 >/dev/null || return 1
    drill_wait_stat 'd["hdd2"]["mirror"] == "healthy"' 300 || return 1
    drill_log "hdd2 attached and re-synced"
    drill_wait_passes 1 && drill_remove hdd0 && drill_wait_passes 1 || return 1
    drill_log "hdd0 dead too: hdd2 alone takes the flushes"
    drill_remove "$RIG_CACHE" || return 1
    drill_load_stop
    drill_wait_stat 's["state"] in ("recovered", "recovery_failed")' || return 1
    [ "$(drill_stat 's["state"]')" = recovered ] || { drill_stats; return 1; }
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: a log mirror removed under load (I/O and flushes went on), a new one attached and re-synced," \
        "the other old one and the SSD removed: the replay from the new mirror alone put the newest flushed pass on the RAID"
}

# Storage-server restart under load: HHC keeps serving from its cache and
# log while the RAID is away, loses nothing, and writes back again once the
# server is back.
drill_server_restart() {
    local before
    rig_up hhc && drill_load_start && drill_wait_passes 1 || return 1
    server_kill
    drill_log "server killed"
    drill_wait_passes 1 60 || return 1
    drill_log "passes go on without the server: $(drill_passes_done) done"
    sleep 3
    server_start >/dev/null || return 1
    before=$(drill_stat 's["counters"]["writebacks"]')
    drill_wait_stat "s[\"counters\"][\"writebacks\"] > $before" 120 || return 1
    drill_log "write-back resumed ($(drill_stat 's["counters"]["writebacks"]') blocks); backing errors counted:" \
        "$(drill_stat 's["counters"]["backing_errors"]')"
    drill_wait_passes 1 && drill_load_stop || return 1
    drill_verify_hhc || return 1
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
        drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 300 || return 1
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: the iSCSI server killed and restarted under load; passes and flushes went on, write-back" \
        "resumed, the newest pass verifies through hhc0 and, after flush_all, on the RAID alone"
}

# A hung storage server: SIGSTOP keeps its TCP connections up, so nothing
# reconnects and bdev_iscsi fails each command after timeout_sec. HHC must
# count the errors and keep every failed write-back dirty (nothing counts
# as written back while the server is stopped), serve writes, flushes and
# the flushed data from the cache, and write back again after SIGCONT.
# A hang shorter than two timeouts (DRILL_HANG_S=7 with timeout_sec 5) is
# the opt-in variant: the server is thawed at DRILL_HANG_S sharp, so the
# checks that take their own time (a pass done, a verify through hhc0)
# come after it, with the load left running through the hang.
drill_server_hang() {
    local t0 e0 we0 fe0 wb0 r0 held resumed short=
    [ "$DRILL_HANG_S" -ge $((2 * DRILL_HANG_TIMEOUT_S)) ] || short=1
    RIG_ISCSI_TIMEOUT=$DRILL_HANG_TIMEOUT_S rig_up hhc && drill_load_start && drill_wait_passes 1 || return 1
    e0=$(drill_stat 's["counters"]["backing_errors"]')
    we0=$(drill_stat 's["counters"]["writeback_errors"]')
    fe0=$(drill_stat 's["counters"]["flush_all_errors"]')
    server_freeze || return 1
    t0=$SECONDS
    # Write-backs the server finished just before it stopped may still land.
    sleep 1
    wb0=$(drill_stat 's["counters"]["writebacks"]')
    drill_log "server stopped (SIGSTOP); bdev_iscsi timeout_sec $DRILL_HANG_TIMEOUT_S, held $DRILL_HANG_S s;" \
        "dirty blocks $(drill_stat 's["gauges"]["dirty_blocks"]'), written back so far $wb0"
    # Every dirty block queued for write-back: each can only time out now.
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null || return 1
    if [ -n "$short" ]; then
        drill_server_hang_short_wait "$t0" "$e0" "$we0" || return 1
    else
        drill_wait_stat "s['counters']['backing_errors'] > $e0 and s['counters']['writeback_errors'] > $we0" \
            $((DRILL_HANG_TIMEOUT_S * 3)) || { drill_log "no backing error within 3 x timeout_sec of the hang"; return 1; }
        drill_log "backing errors after $((SECONDS - t0)) s of hang"
        drill_wait_passes 1 "$DRILL_HANG_S" || { drill_log "no pass completed while the server hung"; return 1; }
        drill_load_stop
        drill_log "passes go on while the server hangs: $(drill_passes_done) done"
        drill_verify_hhc || return 1
    fi
    held=$((SECONDS - t0))
    [ "$held" -ge "$DRILL_HANG_S" ] || sleep $((DRILL_HANG_S - held))
    [ "$(awk '{print $3}' "/proc/$(rig_pid server)/stat" 2>/dev/null)" = T ] ||
        { drill_log "the server did not stay stopped"; return 1; }
    drill_stats >"$RIG_WORK/hang-stats.json"
    held=$((SECONDS - t0))
    # The short hang ends on time: what it left is read from the snapshot.
    [ -z "$short" ] || server_thaw || return 1
    drill_log "after $held s of hang: $(drill_stat_of "$RIG_WORK/hang-stats.json" '"backing_errors %d, writeback_errors %d, flush_all_errors %d, writebacks %d, dirty blocks %d, flush_all in progress %s" % (s["counters"]["backing_errors"], s["counters"]["writeback_errors"], s["counters"]["flush_all_errors"], s["counters"]["writebacks"], s["gauges"]["dirty_blocks"], s["flush_all_in_progress"])')"
    [ "$(drill_stat_of "$RIG_WORK/hang-stats.json" "s['counters']['writebacks'] == $wb0 and s['gauges']['dirty_blocks'] > 0")" = True ] ||
        { drill_log "blocks counted as written back (or none left dirty) while the server was stopped"; return 1; }
    [ -n "$short" ] || { server_thaw && held=$((SECONDS - t0)); } || return 1
    drill_log "server resumed (SIGCONT) after $held s"
    we0=$(drill_stat 's["counters"]["writeback_errors"]')
    r0=$(drill_raid_writes)
    [ -n "$short" ] || drill_load_start
    if drill_wait_stat "s['counters']['writebacks'] > $wb0" "$DRILL_HANG_RESUME_S" 2>/dev/null >/dev/null; then
        drill_log "write-back resumed on the same iSCSI session ($(drill_stat 's["counters"]["writebacks"]') blocks)"
        resumed="write-back resumed on the same session"
    else
        # libiscsi numbered commands it never sent (they waited beyond the
        # target's window and timed out): the target waits for those CmdSNs
        # forever, so nothing more reaches the RAID on this session.
        [ "$(drill_raid_writes)" = "$r0" ] && [ "$(drill_stat "s['counters']['writeback_errors'] > $we0")" = True ] ||
            { drill_log "write-back did not resume, and not for a dead iSCSI session"; drill_stats | cut -c1-900; return 1; }
        drill_log "### write-back did not resume in $DRILL_HANG_RESUME_S s after SIGCONT: $RIG_RAID got no write while hhc0" \
            "counted $(($(drill_stat 's["counters"]["writeback_errors"]') - we0)) more failed write-backs; the iSCSI session is" \
            "dead (server: $(grep -c 'iscsi_update_cmdsn' "$RIG_SERVER_LOG") CmdSN errors). Restarting the server for a new session"
        server_stop && server_start >/dev/null || return 1
        drill_wait_stat "s['counters']['writebacks'] > $wb0" 120 || return 1
        drill_log "write-back resumed after the server restart ($(drill_stat 's["counters"]["writebacks"]') blocks)"
        resumed="the iSCSI session was dead (write-back resumed only after a server restart)"
    fi
    drill_wait_passes 1 && drill_load_stop || return 1
    drill_verify_hhc || return 1
    drill_wait_stat 'not s["flush_all_in_progress"]' 300 || return 1
    drill_log "the flush_all of the hang ended with $(($(drill_stat 's["counters"]["flush_all_errors"]') - fe0)) failed blocks"
    e0=$(drill_stat 's["counters"]["backing_errors"]')
    fe0=$(drill_stat 's["counters"]["flush_all_errors"]')
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
        drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 300 || return 1
    [ "$(drill_stat "s['counters']['flush_all_errors'] == $fe0")" = True ] ||
        { drill_log "flush_all after the hang failed: backing errors $e0 -> $(drill_stat 's["counters"]["backing_errors"]')"; return 1; }
    drill_log "flush_all after the hang: every dirty block written back, backing_errors $e0 -> $(drill_stat 's["counters"]["backing_errors"]')"
    host_kill
    drill_verify_raid || return 1
    local during="passes and flushes went on, the newest pass read back from the cache"
    [ -z "$short" ] || during="passes and flushes went on through it, the newest pass read back after it"
    drill_log "checked: the iSCSI server stopped (SIGSTOP) $held s under load, past timeout_sec ${DRILL_HANG_TIMEOUT_S}:" \
        "write-backs failed with backing errors and stayed dirty (none counted done), $during;" \
        "after SIGCONT $resumed; after flush_all the RAID alone holds the newest pass"
}

# The short hang's part while the server is stopped: backing errors are
# awaited only until DRILL_HANG_S (a command sent just before the stop
# times out after timeout_sec; none may have been out), then the server
# must be thawed on time, so nothing else is waited for.
drill_server_hang_short_wait() { # t0 backing-errors-before writeback-errors-before
    local left=$((DRILL_HANG_S - (SECONDS - $1)))
    if [ "$left" -gt 0 ] && drill_wait_stat "s['counters']['backing_errors'] > $2 and s['counters']['writeback_errors'] > $3" \
        "$left" 2>/dev/null >/dev/null; then
        drill_log "backing errors after $((SECONDS - $1)) s of hang"
    else
        drill_log "no backing error within the ${DRILL_HANG_S} s hang"
    fi
}

# The server's RAID as bdev_raid_get_bdevs reports it: "state discovered/total".
drill_raid_state() {
    RIG_SOCK=$RIG_SERVER_SOCK rig_call bdev_raid_get_bdevs '{"category":"all"}' | python3 -c "import json, sys
r = {b['name']: b for b in json.loads(sys.stdin.readline())}['$RIG_RAID']
print('%s %d/%d' % (r['state'], r['num_base_bdevs_discovered'], r['num_base_bdevs']))"
}

# A member disk of the server's RAID dies under load: the RAID is SPDK's
# raid1 over two HDD models (RIG_RAID_LEVEL=raid1, rig_lib.sh); one model
# bdev is deleted (hot-remove, a dead disk) just after a flush_all starts.
# Background write-back is held off (threshold 100 %, no idle write-back),
# so the flush_all and the last one write thousands of blocks (idle
# write-back once emptied the cache between two passes). The RAID goes on
# degraded: no backing error, passes and write-back go on and reach it,
# and the surviving member alone holds the newest pass.
drill_raid_member_death() {
    local e0 r0 state
    RIG_RAID_LEVEL=$DRILL_RAID_LEVEL RIG_HHC_ARGS='"dirty_threshold":100,"idle_after_ms":600000' rig_up hhc &&
        drill_load_start && drill_wait_passes 2 || return 1
    state=$(drill_raid_state)
    [ "$state" = "online 2/2" ] || { drill_log "$RIG_RAID is $state before the fault, not online 2/2"; return 1; }
    e0=$(drill_stat 's["counters"]["backing_errors"]')
    drill_log "dirty blocks $(drill_stat 's["gauges"]["dirty_blocks"]'); flush_all, then ${RIG_RAID}_m1 removed"
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null && rig_rpc server bdev_hhc_model_delete "${RIG_RAID}_m1" >/dev/null ||
        return 1
    drill_log "member ${RIG_RAID}_m1 of $RIG_RAID ($DRILL_RAID_LEVEL) removed (a dead disk); by then the flush_all had" \
        "$(drill_stat '"%d blocks to go (in progress: %s)" % (s["flush_all_blocks_remaining"], s["flush_all_in_progress"])')"
    state=$(drill_raid_state)
    [ "$state" = "online 1/2" ] || { drill_log "$RIG_RAID did not go on degraded: $state"; return 1; }
    r0=$(drill_raid_writes)
    drill_wait_stat 'not s["flush_all_in_progress"]' 300 && drill_wait_passes 2 || return 1
    drill_load_stop
    drill_log "degraded: $(drill_passes_done) passes done"
    drill_verify_hhc || return 1
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
        drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 300 || return 1
    [ "$(drill_stat "s['counters']['backing_errors']")" = "$e0" ] ||
        { drill_log "backing errors $e0 -> $(drill_stat 's["counters"]["backing_errors"]') though the RAID stayed online"; return 1; }
    [ "$(drill_raid_writes)" -gt "$r0" ] || { drill_log "no write reached $RIG_RAID after the member died"; return 1; }
    drill_log "after the member died $RIG_RAID took $(($(drill_raid_writes) - r0)) writes; no backing error"
    host_kill
    drill_verify_raid || return 1
    drill_log "checked: a member of the server's raid1 (two HDD models) removed under load as a flush_all began;" \
        "the RAID went on degraded (1/2), no backing error, passes and write-back went on and reached it, and" \
        "the surviving member alone holds the newest pass (fresh iSCSI session)"
}

# Both hosts lost: server and host killed at once, both restarted; hhc0
# comes back warm over a new iSCSI session and the newest pass verifies.
drill_whole_host_loss() {
    rig_up hhc && drill_load_start && drill_wait_passes 2 || return 1
    host_kill &
    server_kill
    wait
    drill_load_stop
    server_start >/dev/null && host_start hhc >/dev/null || return 1
    grep -q "warm start from cache bdev $RIG_CACHE" "$RIG_HOST_LOG" || { drill_log "hhc0 did not start warm"; return 1; }
    drill_verify_hhc || return 1
    drill_log "checked: server and host killed together and restarted; hhc0 warm over a new iSCSI session," \
        "the newest flushed pass verifies"
}

# The RAID check must be able to fail: under policy wb (no log), with the
# dirty data kept in the cache (no write-back for the threshold, nor when
# idle: between the load's end and the cache's removal idle write-back once
# wrote nearly all of the pass back, leaving 402 dirty blocks, and the check
# passed), the cache's loss loses flushed writes, and drill_verify_raid has
# to say so.
drill_check_can_fail() {
    RIG_HHC_ARGS='"dirty_threshold":100,"idle_after_ms":600000' rig_up wb && drill_load_start && drill_wait_passes 1 || return 1
    drill_load_stop
    drill_log "dirty blocks before the cache goes: $(drill_stat 's["gauges"]["dirty_blocks"]')"
    drill_remove "$RIG_CACHE" || return 1
    host_kill
    if drill_verify_raid; then
        drill_log "the RAID check passed though the flushed pass died with the cache: it checks nothing"
        return 1
    fi
    drill_log "checked: under wb the cache's loss loses the flushed pass, and the RAID check catches it"
}

# The check must also catch an older version: the newest pass k, written
# back in full, then 1 MiB of its region on the backing overwritten (by
# server_fio, the host down) with intact blocks of pass k - 2, the region's
# previous pass: crc32c alone passes them, the backing check must fail on
# them, by their seed.
drill_stale_check_can_fail() {
    local k
    rig_up hhc && drill_load_start && drill_wait_passes 3 || return 1
    drill_load_stop
    rig_rpc host bdev_hhc_flush_all -b "$RIG_HHC" >/dev/null &&
        drill_wait_stat 'not s["flush_all_in_progress"] and s["gauges"]["dirty_blocks"] == 0' 300 || return 1
    host_kill
    drill_verify_raid || return 1
    k=$(drill_last_pass)
    server_fio --rw=randwrite --offset=$(((k % 2) * DRILL_REGION_MB + 1))m --size=1m --randseed=$((DRILL_SEED0 + k - 2)) \
        --verify=crc32c --do_verify=0 --end_fsync=1 >"$RIG_WORK/stale.log" 2>&1 || { tail -20 "$RIG_WORK/stale.log"; return 1; }
    drill_log "1 MiB of pass $k's region overwritten on the backing with blocks of pass $((k - 2))"
    # Intact blocks at their offsets: crc32c alone passes them.
    # shellcheck disable=SC2046
    server_fio $(drill_verify_args "$k") --verify_header_seed=0 >"$RIG_WORK/stale-crc.log" 2>&1 ||
        { drill_log "the older blocks fail even without the seed check"; tail -20 "$RIG_WORK/stale-crc.log"; return 1; }
    if drill_verify_raid; then
        drill_log "the backing check passed a region holding an older pass: it cannot tell versions apart"
        return 1
    fi
    grep -q "bad header rand_seed" "$RIG_WORK/verify-raid.log" ||
        { drill_log "the check failed, but not on the older blocks' seed"; return 1; }
    drill_log "checked: blocks of an older pass in the newest pass's region fail the backing check (bad header rand_seed)"
}

# drill_raid_member_death runs only on request (DRILL_RAID_MEMBER=1): SPDK's
# raid1 crashes at random in it (docs/spdk.md).
DRILLS="drill_check_can_fail drill_stale_check_can_fail drill_power_loss drill_ssd_death drill_hdd_death drill_server_restart drill_server_hang${DRILL_RAID_MEMBER:+ drill_raid_member_death} drill_whole_host_loss"

# Runs one drill on a rig of its own; prints PASS or FAIL.
drill_run() { # drill
    local rc
    rm -f "$DRILL_PASSES_FILE"
    (
        trap 'drill_load_stop; KEEP=${KEEP:-} rig_down >/dev/null 2>&1' EXIT
        "$1"
    )
    rc=$?
    if [ "$rc" = 0 ]; then echo "[drill] PASS $1"; else echo "[drill] FAIL $1"; fi
    return "$rc"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    failed=0
    [ $# -gt 0 ] || read -ra drills <<<"$DRILLS"
    for drill in "${@:-${drills[@]}}"; do
        drill_run "$drill" || failed=$((failed + 1))
    done
    [ "$failed" = 0 ]
fi
