#!/usr/bin/env bash
# How long a volume is away when its host is lost and the peer takes it
# over (docs/operations.md, "The whole host is lost"): the rig with its log
# on the host's HDD and the peer's, over tgt; TAKEOVER_MB written once with
# a FLUSH every 8 writes of 128 KiB and write-back held off, so that all of
# it is dirty and must be replayed; the host killed; then the peer's
# takeover (tests/spdk/rig_peer.sh, peer_take_over: one bdev_hhc_create
# with takeover) until hhc0 is exported again. A benchmark: it prints
# figures, and fails only when the rig or the takeover does.
#
#   bash tests/spdk/takeover_bench.sh                  # 1 GiB, a few minutes
#   TAKEOVER_MB=256 bash tests/spdk/takeover_bench.sh

set -u -o pipefail
TAKEOVER_MB=${TAKEOVER_MB:-1024}
# (Before rig_lib.sh, which loads the server kind's functions.)
export RIG_SERVER=tgt RIG_PEER=1 RIG_HDDS=1
export RIG_RAID_MB=$((TAKEOVER_MB + 256)) RIG_SSD_MB=$((TAKEOVER_MB + 256)) RIG_HDD_MB=$((TAKEOVER_MB * 2 + 256))
export RIG_HHC_ARGS='"dirty_threshold":100,"idle_after_ms":600000'
# shellcheck source=tests/spdk/rig_lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rig_lib.sh"
trap 'rig_down >/dev/null 2>&1' EXIT

rig_up hhc >/dev/null || exit 1
started=$(date +%s%N)
nvmf_fio --rw=write --bs=128k --iodepth=8 --fsync=8 --end_fsync=1 --size="${TAKEOVER_MB}m" --verify=0 --do_verify=0 \
    >"$RIG_WORK/fill.log" 2>&1 || { tail -5 "$RIG_WORK/fill.log"; exit 1; }
written_ms=$((($(date +%s%N) - started) / 1000000))
dirty=$(RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_hhc_get_stats "{\"name\":\"$RIG_HHC\"}" |
    python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["gauges"]["dirty_blocks"])') || exit 1
host_kill
lost=$(date +%s%N)
answer=$(peer_take_over) || exit 1
served_ms=$((($(date +%s%N) - lost) / 1000000))

python3 - "$answer" "$dirty" "$served_ms" "$written_ms" "$TAKEOVER_MB" <<'PY'
import json, sys
answer = json.loads(sys.argv[1])
dirty, served_ms, written_ms, mb = (int(a) for a in sys.argv[2:])
replayed_mb = answer["blocks_replayed"] * 4096 / 2**20
print()
print("takeover by the peer, tgt server, %d MiB written once (%.1f s) and held dirty" % (mb, written_ms / 1000))
print("  dirty blocks at the loss   %d (%.0f MiB)" % (dirty, dirty * 4096 / 2**20))
print("  blocks replayed            %d (%.0f MiB) from %d log parts" % (answer["blocks_replayed"], replayed_mb, answer["parts_replayed"]))
print("  scan of the log            %.1f s" % (answer["scan_ms"] / 1000))
print("  replay                     %.1f s, %.0f MiB/s" % (answer["replay_ms"] / 1000, replayed_mb / max(answer["replay_ms"], 1) * 1000))
print("  host lost -> hhc0 served   %.1f s (releasing the mirror, attaching the LUN and a cache, the replay, the format, the export)" % (served_ms / 1000))
PY
