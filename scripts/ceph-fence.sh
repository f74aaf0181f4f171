#!/usr/bin/env bash
# Fences every client that has a Ceph RBD image open, with Ceph's own
# mechanism, before another host takes the volume over (docs/operations.md,
# "The whole host is lost"): each watcher of the image (a client with it
# open: the lost host's bdev_rbd) is added to the OSD blocklist, and any
# lock on the image (the exclusive lock a writer holds) is broken. From
# then on the cluster refuses every operation of those clients, so a host
# that was only cut off or frozen cannot write the image again, not even
# by asking for the exclusive lock back. A process started afterwards is a
# new client and is not blocklisted.
#
#   scripts/ceph-fence.sh [-c CONF] [--id USER] [--expire SECONDS] POOL/IMAGE
#
# Run it where the ceph and rbd commands reach the cluster, before the
# takeover opens the image (the new owner is not a watcher yet). It prints
# each client it fenced and fails if a watcher is still there afterwards.
# The blocklist entries expire after --expire seconds (a week by default):
# keep the old host's process from coming back before then, or remove the
# entries by hand (`ceph osd blocklist rm ADDRESS`) once it is gone.

set -u -o pipefail
usage() { sed -n '12,12p' "$0" | sed 's/^# *//' >&2; exit 2; }

conf=() id=() expire=$((7 * 24 * 3600)) image=
while [ $# -gt 0 ]; do
    case $1 in
        -c | --conf) [ $# -ge 2 ] || usage; conf=(-c "$2"); shift 2 ;;
        --id) [ $# -ge 2 ] || usage; id=(--id "$2"); shift 2 ;;
        --expire) [ $# -ge 2 ] || usage; expire=$2; shift 2 ;;
        -h | --help) usage ;;
        -*) echo "ceph-fence: unknown option $1" >&2; usage ;;
        *) [ -z "$image" ] || usage; image=$1; shift ;;
    esac
done
[ -n "$image" ] && [[ $image == */* ]] || { echo "ceph-fence: give the image as POOL/IMAGE" >&2; usage; }
[[ $expire =~ ^[1-9][0-9]*$ ]] || { echo "ceph-fence: --expire takes a number of seconds" >&2; exit 2; }
for tool in ceph rbd python3; do
    command -v "$tool" >/dev/null || { echo "ceph-fence: $tool is missing (Debian's ceph-common)" >&2; exit 1; }
done

ceph_() { timeout 60 ceph "${conf[@]}" "${id[@]}" "$@"; }
rbd_() { timeout 60 rbd "${conf[@]}" "${id[@]}" "$@"; }

# The image's watchers' addresses, one a line.
watchers() {
    rbd_ status "$image" --format json |
        python3 -c 'import json, sys; [print(w["address"]) for w in json.load(sys.stdin).get("watchers", [])]'
}

addresses=$(watchers) || { echo "ceph-fence: cannot read the status of $image" >&2; exit 1; }
fenced=0
for address in $addresses; do
    # (ceph says "blocklisting ADDRESS until ..." on stderr)
    said=$(ceph_ osd blocklist add "$address" "$expire" 2>&1) ||
        { echo "ceph-fence: blocklisting $address failed: $said" >&2; exit 1; }
    echo "ceph-fence: $image: client $address blocklisted for $expire s"
    fenced=$((fenced + 1))
done

# Locks: the exclusive lock a writer took ("auto ..."), or advisory ones.
locks=$(rbd_ lock ls "$image" --format json |
    python3 -c 'import json, sys
locks = json.load(sys.stdin)
for lock in (locks.values() if isinstance(locks, dict) else locks):
    print("%s\t%s" % (lock["id"], lock["locker"]))') || { echo "ceph-fence: cannot list the locks of $image" >&2; exit 1; }
while IFS=$'\t' read -r lock locker; do
    [ -n "$lock" ] || continue
    rbd_ lock rm "$image" "$lock" "$locker" >/dev/null || { echo "ceph-fence: breaking lock '$lock' of $locker failed" >&2; exit 1; }
    echo "ceph-fence: $image: lock '$lock' of $locker broken"
done <<<"$locks"

# A blocklisted client's watch goes at once; one that is still there was
# not fenced.
for _ in $(seq 50); do
    left=$(watchers) || exit 1
    [ -n "$left" ] || break
    sleep 0.2
done
if [ -n "$left" ]; then
    echo "ceph-fence: $image is still open by: $left" >&2
    exit 1
fi
echo "ceph-fence: $image: $fenced client(s) fenced, no client has it open"
