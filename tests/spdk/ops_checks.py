"""Checks of the HHC operator RPCs against a running target, for
tests/spdk/run.sh: python3 ops_checks.py SOCKET CHECK [ARGS...].

Each check prints what it saw and exits non-zero on the first mismatch.
Uses SPDK's python client (PYTHONPATH carries it, as for raw_call)."""

import json
import sys
import time

from spdk.rpc.client import JSONRPCClient, JSONRPCException


def stats(client, name="hhc0"):
    return client.call("bdev_hhc_get_stats", {"name": name})


def expect(condition, what, seen=None):
    if not condition:
        print("FAILED:", what)
        if seen is not None:
            print(json.dumps(seen, indent=1)[:4000])
        sys.exit(1)
    print("ok:", what)


def raw_call(method, params):
    """One request whose params need not be an object (SPDK's client only
    sends objects), on a connection of its own; returns the result or
    raises JSONRPCException with the error."""
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    request = {"jsonrpc": "2.0", "method": method, "id": 1}
    if params is not None:
        request["params"] = params
    sock.sendall(json.dumps(request).encode())
    sock.settimeout(50)
    buffer = b""
    decoder = json.JSONDecoder()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise JSONRPCException("Connection closed without an answer")
        buffer += chunk
        try:
            answer, _ = decoder.raw_decode(buffer.decode())
            break
        except ValueError:
            continue
    sock.close()
    if "error" in answer:
        raise JSONRPCException(json.dumps(answer["error"]))
    return answer["result"]


def call(client, method, params):
    if isinstance(params, dict):
        return client.call(method, params)
    return raw_call(method, params)


def expect_error(client, method, params, text):
    """The call fails with a JSON-RPC error whose message holds `text`."""
    try:
        result = call(client, method, params)
    except JSONRPCException as e:
        expect(text in str(e), f"{method} {json.dumps(params)[:80]} refused with '{text}'", str(e))
        return
    expect(False, f"{method} {json.dumps(params)[:80]} must fail, answered {result}")


def check_moved(client, minimum_writes):
    """After I/O: counters, flush latency and rates moved; shape of the answer."""
    s = stats(client)
    c = s["counters"]
    expect(c["writes"] >= int(minimum_writes), f"writes {c['writes']} >= {minimum_writes}", s)
    expect(c["flushes"] > 0 and s["flush_latency_us"]["count"] > 0, "flushes counted and timed", s)
    lat = s["flush_latency_us"]
    expect(0 < lat["p50"] <= lat["p99"] <= lat["max"] or lat["max"] == 0, "flush p50 <= p99 <= max", lat)
    expect(c["log_bytes_written"] > 0, "the log was written", s)
    expect(s["gauges"]["cache_blocks"] > 0 and "dirty_blocks" in s["gauges"], "gauges present", s)
    expect(s["rates"]["window_ms"] >= 0 and "writes_per_s" in s["rates"], "rates over a window", s["rates"])
    ctx = s["base_io_contexts"]
    expect(0 <= ctx["in_use"] <= ctx["total"] and ctx["total"] > 4096, "base I/O contexts allocated at creation", ctx)
    expect([d["role"] for d in s["devices"]] == ["backing", "cache", "log0"], "devices listed", s["devices"])
    expect(s["devices"][2]["mirror"] == "healthy", "the mirror is healthy", s["devices"])
    # A second get right away: its rate window starts at the first.
    again = stats(client)
    expect(again["rates"]["window_ms"] < 5000 and again["counters"]["writes"] >= c["writes"],
           "rates since the previous get; counters monotonic", again["rates"])


def check_reset(client):
    before = stats(client)
    expect(client.call("bdev_hhc_reset_stats", {"name": "hhc0"}) is True, "reset answers true")
    s = stats(client)
    c = s["counters"]
    expect(c["writes"] == 0 and c["flushes"] == 0 and c["log_bytes_written"] == 0, "counters zero after reset", c)
    expect(s["flush_latency_us"]["count"] == 0, "flush latency reset", s["flush_latency_us"])
    expect(s["since_reset_ms"] < 5000, "since_reset_ms restarted", s)
    expect(s["gauges"]["cache_blocks"] == before["gauges"]["cache_blocks"]
           and s["gauges"]["log_segments_total"] == before["gauges"]["log_segments_total"], "gauges not reset", s)


def check_errors(client):
    expect_error(client, "bdev_hhc_get_stats", {"name": "nope"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_reset_stats", {"name": "nope"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_get_stats", {}, "invalid parameters")
    expect_error(client, "bdev_hhc_get_stats", {"name": 7}, "invalid parameters")
    expect_error(client, "bdev_hhc_get_stats", {"name": "hhc0", "extra": 1}, "invalid parameters")


def wait_policy(client, policy, timeout_s=60):
    """set_policy, then wait_switched."""
    answer = client.call("bdev_hhc_set_policy", {"name": "hhc0", "policy": policy})
    print("set_policy", policy, "->", answer)
    wait_switched(client, policy, timeout_s)


def wait_switched(client, policy, timeout_s=60):
    """Polls get_stats until hhc0 runs `policy`, the switch complete."""
    deadline = time.time() + float(timeout_s)
    while time.time() < deadline:
        s = stats(client)
        if s["policy"] == policy and s["policy_target"] is None:
            # (dirty_blocks counts write-throughs in flight too: not 0 under I/O)
            print(f"switched to {policy}; dirty blocks {s['gauges']['dirty_blocks']}")
            return
        expect(s["policy_target"] in (policy, None), f"policy_target {policy} while switching", s)
        time.sleep(0.1)
    expect(False, f"switch to {policy} complete within {timeout_s} s", stats(client))


def wait_counter(client, name, minimum=1, timeout_s=60):
    """Until counter `name` reaches `minimum` (fio has started; examine
    by other modules reads a few blocks of a new bdev)."""
    deadline = time.time() + float(timeout_s)
    while time.time() < deadline:
        if stats(client)["counters"][name] >= int(minimum):
            return
        time.sleep(0.05)
    expect(False, f"{minimum} {name}")


def wait_writes(client, timeout_s=60):
    wait_counter(client, "writes", 1, timeout_s)


def switch_policies(client, *policies):
    for policy in policies:
        wait_policy(client, policy)
    expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0", "policy": "lru"}, "unknown policy 'lru'")
    expect_error(client, "bdev_hhc_set_policy", {"name": "nope", "policy": "wt"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0"}, "invalid parameters")


def flush_all(client):
    """flush_all with dirty blocks: progress falls to zero, the cache stays
    warm (no eviction), nothing is dirty afterwards (no writes meanwhile)."""
    before = stats(client)
    dirty = before["gauges"]["dirty_blocks"]
    expect(dirty > 0, f"{dirty} dirty blocks before flush_all", before["gauges"])
    started = client.call("bdev_hhc_flush_all", {"name": "hhc0"})
    expect(started["in_progress"] and started["blocks_remaining"] > 0, f"flush_all started: {started}")
    remaining = started["blocks_remaining"]
    deadline = time.time() + 120
    seen_in_progress = False
    while time.time() < deadline:
        s = stats(client)
        expect(s["flush_all_blocks_remaining"] <= remaining, f"remaining falls: {s['flush_all_blocks_remaining']}")
        remaining = s["flush_all_blocks_remaining"]
        if not s["flush_all_in_progress"]:
            break
        seen_in_progress = True
        time.sleep(0.1)
    expect(seen_in_progress, "get_stats saw flush_all_in_progress")
    expect(not s["flush_all_in_progress"], "flush_all finished", s)
    c = s["counters"]
    expect(c["flush_alls_completed"] - before["counters"]["flush_alls_completed"] == 1
           and c["flush_all_errors"] == 0, "one flush_all completed without errors", c)
    expect(s["gauges"]["dirty_blocks"] == 0, "nothing dirty", s["gauges"])
    expect(c["evictions"] == before["counters"]["evictions"], "no eviction: the cache stays warm", c)
    expect(c["writebacks"] - before["counters"]["writebacks"] >= dirty, "every dirty block written back", c)


def contexts_drained(client):
    """Idle and clean: every base I/O context is back in the pool."""
    deadline = time.time() + 60
    while stats(client)["base_io_contexts"]["in_use"] != 0 and time.time() < deadline:
        time.sleep(0.1)
    ctx = stats(client)["base_io_contexts"]
    expect(ctx["in_use"] == 0, f"every base I/O context returned ({ctx['total']} allocated)", stats(client))


def read_misses_zero(client):
    c = stats(client)["counters"]
    expect(c["reads"] > 0 and c["read_misses"] == 0, f"{c['read_hits']} read hits, no miss: warm", c)


def claims(client):
    return sorted((b["name"], b["claimed"]) for b in client.call("bdev_get_bdevs"))


def hhc_names(client):
    return sorted(b["name"] for b in client.call("bdev_hhc_get_bdevs"))


# Bases for the hostile requests (run.sh `hostile_rpcs` creates them): hhc0
# over back, ssd and hdd0; spare (malloc, 4 KiB blocks), sparelog (malloc,
# 16 MiB), m8k (8 KiB blocks), tinylog (1 MiB: no room for one segment),
# pt0base (claimed by passthru pt0).
LONG = "h" * 300
GOOD = {"name": "h1", "backing": "spare", "cache": "sparecache", "logs": ["sparelog"]}


def create(**changes):
    params = dict(GOOD)
    params.update(changes)
    return {k: v for k, v in params.items() if v is not None}


HOSTILE = [
    ("bdev_hhc_create", None, "invalid parameters"),
    ("bdev_hhc_create", [1, 2], "invalid parameters"),
    ("bdev_hhc_create", create(name=5), "invalid parameters"),
    ("bdev_hhc_create", create(color="red"), "invalid parameters"),
    ("bdev_hhc_create", create(logs="sparelog"), "invalid parameters"),
    ("bdev_hhc_create", create(logs=[1]), "invalid parameters"),
    ("bdev_hhc_create", create(logs=["l%d" % i for i in range(9)]), "invalid parameters"),
    ("bdev_hhc_create", create(block_size=-1), "invalid parameters"),
    ("bdev_hhc_create", create(block_size=1 << 32), "invalid parameters"),
    ("bdev_hhc_create", create(block_size=4096.5), "invalid parameters"),
    ("bdev_hhc_create", create(block_size="4k"), "invalid parameters"),
    ("bdev_hhc_create", create(policy=7), "invalid parameters"),
    ("bdev_hhc_create", create(name="h\u0000x"), "invalid parameters"),
    ("bdev_hhc_create", create(block_size=0), "block_size 0 must be"),
    ("bdev_hhc_create", create(block_size=3000), "block_size 3000"),
    ("bdev_hhc_create", create(segment_size=12345), "segment_size 12345"),
    ("bdev_hhc_create", create(buffer_count=1), "buffer_count 1"),
    ("bdev_hhc_create", create(dirty_threshold=0), "dirty_threshold 0"),
    ("bdev_hhc_create", create(dirty_threshold=101), "dirty_threshold 101"),
    ("bdev_hhc_create", create(barrier_gap=6144), "barrier_gap 6144 bytes must be a multiple of block_size 4096"),
    ("bdev_hhc_create", create(barrier_gap=1 << 30), "barrier_gap 1073741824 bytes must be a multiple"),
    ("bdev_hhc_create", create(barrier_gap=-4096), "invalid parameters"),
    ("bdev_hhc_create", create(barrier_gap=1 << 32), "invalid parameters"),
    ("bdev_hhc_create", create(backing_stripe=6144), "backing_stripe 6144 bytes must be a multiple of block_size 4096"),
    ("bdev_hhc_create", create(backing_stripe=2 << 20), "backing_stripe 2097152 bytes must be a multiple"),
    ("bdev_hhc_create", create(log_timeout_ms=-1), "invalid parameters"),
    ("bdev_hhc_create", create(writeback_parallelism=2000), "writeback_parallelism 2000 must be 1..1024"),
    ("bdev_hhc_create", create(seq_cutoff_threshold=1), "seq_cutoff_threshold 1 bytes"),
    ("bdev_hhc_create", create(seq_cutoff_policy="sometimes"), "unknown seq_cutoff_policy 'sometimes'"),
    ("bdev_hhc_create", create(seq_cutoff_policy=1), "invalid parameters"),
    ("bdev_hhc_create", create(idle_after_ms="50"), "invalid parameters"),
    ("bdev_hhc_create", create(policy="HHC"), "unknown policy 'HHC'"),
    ("bdev_hhc_create", create(logs=None), "policy hhc needs at least one log"),
    ("bdev_hhc_create", create(name=""), "name must not be empty"),
    ("bdev_hhc_create", create(name="h\u0001x"), "control character"),
    ("bdev_hhc_create", create(backing="sp\nare"), "backing: bdev name"),
    ("bdev_hhc_create", create(name=LONG), "a bdev name of 300 bytes; at most 255"),
    ("bdev_hhc_create", create(logs=[LONG]), "logs: a bdev name of 300 bytes"),
    ("bdev_hhc_create", create(name="hhc0"), "already exists with other devices"),
    ("bdev_hhc_create", create(name="spare", backing="sparecache", cache="m8k"), "a bdev named 'spare' already exists"),
    ("bdev_hhc_create", create(cache="spare"), "given both as backing and as cache"),
    ("bdev_hhc_create", create(logs=["sparelog", "sparelog"]), "logs: bdev 'sparelog' is given twice"),
    ("bdev_hhc_create", create(name="spare"), "is the name of the HHC bdev itself"),
    ("bdev_hhc_create", create(cache="ssd"), "cache: bdev 'ssd' is already claimed"),
    ("bdev_hhc_create", create(logs=["pt0base"]), "logs: bdev 'pt0base' is already claimed"),
    ("bdev_hhc_create", create(backing="m8k"), "backing bdev 'm8k' has block size 8192"),
    ("bdev_hhc_create", create(cache="m8k"), "cache bdev 'm8k' has block size 8192"),
    ("bdev_hhc_create", create(logs=["tinylog"]), "log device of 1048576 bytes holds 0 segments"),
    ("bdev_hhc_create", create(cache="nope"), "cache: no bdev named 'nope'"),
    ("bdev_hhc_create", create(cache=None), "cache must name a bdev"),
    ("bdev_hhc_create", create(cache=None, policy="passthrough"), "only policy passthrough without logs"),
    ("bdev_hhc_delete", None, "invalid parameters"),
    ("bdev_hhc_delete", {"name": 5}, "invalid parameters"),
    ("bdev_hhc_delete", {"name": "hhc0", "force": True}, "invalid parameters"),
    ("bdev_hhc_delete", {"name": "nope"}, "no HHC bdev named 'nope'"),
    ("bdev_hhc_delete", {"name": "spare"}, "no HHC bdev named 'spare'"),
    ("bdev_hhc_get_bdevs", {"name": 5}, "invalid parameters"),
    ("bdev_hhc_get_bdevs", {"name": "nope"}, "no HHC bdev named 'nope'"),
]
for method in ("bdev_hhc_get_stats", "bdev_hhc_reset_stats", "bdev_hhc_flush_all"):
    HOSTILE += [
        (method, None, "invalid parameters"),
        (method, {"name": ["hhc0"]}, "invalid parameters"),
        (method, {"name": "hhc0", "all": 1}, "invalid parameters"),
        (method, {"name": "nope"}, "no HHC bdev named 'nope'"),
        (method, {"name": "spare"}, "no HHC bdev named 'spare'"),
        (method, {"name": "x\u0002"}, "control character"),
        (method, {"name": LONG}, "at most 255"),
    ]
HOSTILE += [
    ("bdev_hhc_set_policy", {"name": "hhc0"}, "invalid parameters"),
    ("bdev_hhc_set_policy", {"name": "hhc0", "policy": 7}, "invalid parameters"),
    ("bdev_hhc_set_policy", {"name": "hhc0", "policy": "wt", "now": True}, "invalid parameters"),
    ("bdev_hhc_set_policy", {"name": "hhc0", "policy": "lru"}, "unknown policy 'lru'"),
    ("bdev_hhc_set_policy", {"name": "hhc0", "policy": ""}, "unknown policy ''"),
    ("bdev_hhc_set_policy", {"name": "nope", "policy": "wt"}, "no HHC bdev named 'nope'"),
]
SET_OPTIONS = "bdev_hhc_set_options"
HOSTILE += [
    (SET_OPTIONS, None, "invalid parameters"),
    (SET_OPTIONS, {"dirty_threshold": 30}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "colour": 1}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "dirty_threshold": "30"}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "dirty_threshold": -1}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "writeback_parallelism": 1 << 32}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "seq_cutoff_threshold": 1.5}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "seq_cutoff_policy": 3}, "invalid parameters"),
    (SET_OPTIONS, {"name": "hhc0", "seq_cutoff_policy": None}, "invalid parameters"),
    (SET_OPTIONS, {"name": "nope", "dirty_threshold": 30}, "no HHC bdev named 'nope'"),
    (SET_OPTIONS, {"name": "x\u0004", "dirty_threshold": 30}, "control character"),
    (SET_OPTIONS, {"name": "hhc0", "dirty_threshold": 0}, "dirty_threshold 0"),
    (SET_OPTIONS, {"name": "hhc0", "dirty_threshold": 101}, "dirty_threshold 101"),
    (SET_OPTIONS, {"name": "hhc0", "writeback_parallelism": 0}, "writeback_parallelism 0"),
    (SET_OPTIONS, {"name": "hhc0", "writeback_parallelism": 65}, "writeback_parallelism 65 exceeds 64"),
    (SET_OPTIONS, {"name": "hhc0", "idle_after_ms": 0}, "idle_after_ms: 0"),
    (SET_OPTIONS, {"name": "hhc0", "seq_cutoff_threshold": 4096}, "seq_cutoff_threshold 4096 bytes"),
    (SET_OPTIONS, {"name": "hhc0", "seq_cutoff_threshold": 1 << 40}, "seq_cutoff_threshold 1099511627776"),
    (SET_OPTIONS, {"name": "hhc0", "seq_cutoff_policy": "sometimes"}, "unknown seq_cutoff_policy 'sometimes'"),
    # One bad value among good ones: none of them changes.
    (SET_OPTIONS, {"name": "hhc0", "dirty_threshold": 40, "seq_cutoff_policy": "Always"}, "unknown seq_cutoff_policy"),
    (SET_OPTIONS, {"name": "hhc0", "dirty_threshold": 40, "writeback_parallelism": 100}, "exceeds 64"),
]
for method in ("bdev_hhc_attach_log", "bdev_hhc_detach_log"):
    HOSTILE += [
        (method, {"name": "hhc0"}, "invalid parameters"),
        (method, {"name": "hhc0", "log": ["hdd0"]}, "invalid parameters"),
        (method, {"name": "nope", "log": "sparelog"}, "no HHC bdev named 'nope'"),
        (method, {"name": "hhc0", "log": "x\u0003"}, "control character"),
    ]
HOSTILE += [
    ("bdev_hhc_recover", None, "invalid parameters"),
    ("bdev_hhc_recover", {"name": "hhc0"}, "invalid parameters"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": 5}, "invalid parameters"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "passthrough", "now": 1}, "invalid parameters"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "cache", "cache": ["spare"]}, "invalid parameters"),
    ("bdev_hhc_recover", {"name": "nope", "mode": "passthrough"}, "no HHC bdev named 'nope'"),
    ("bdev_hhc_recover", {"name": "x\u0004", "mode": "replay"}, "control character"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "fast"}, "unknown mode 'fast'"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "cache"}, "needs the fresh cache bdev"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "passthrough", "cache": "spare"}, "only mode cache"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "passthrough"}, "has not lost its cache (state running)"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "cache", "cache": "sparecache"}, "has not lost its cache"),
    ("bdev_hhc_recover", {"name": "hhc0", "mode": "cache", "cache": "x\u0005"}, "cache: bdev name"),
]
HOSTILE += [
    ("bdev_hhc_forget", None, "invalid parameters"),
    ("bdev_hhc_forget", {"cache": 5}, "invalid parameters"),
    ("bdev_hhc_forget", {"cache": "ssd", "now": 1}, "invalid parameters"),
    ("bdev_hhc_forget", {"cache": "nope"}, "no bdev named 'nope'"),
    ("bdev_hhc_forget", {"cache": "ssd"}, "is in use (claimed)"),
    ("bdev_hhc_forget", {"cache": "ssd", "force": True}, "is in use (claimed)"),
    ("bdev_hhc_forget", {"cache": "hhc0"}, "is an HHC bdev"),
    ("bdev_hhc_forget", {"cache": "spare"}, "holds no HHC cache"),
    ("bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd0"}, "already a device of 'hhc0'"),
    ("bdev_hhc_attach_log", {"name": "hhc0", "log": "sparelog"}, "log mirror slots of 'hhc0' are in use"),
    ("bdev_hhc_detach_log", {"name": "hhc0", "log": "sparelog"}, "no attached log mirror 'sparelog'"),
    ("bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd0"}, "last healthy log mirror under policy hhc"),
]


def hostile(client):
    """Every request of HOSTILE is refused with an error naming the problem;
    no HHC bdev appears, no claim changes; then a bdev made without logs
    refuses a switch to hhc."""
    before = (claims(client), hhc_names(client), stats(client)["options"])
    for method, params, text in HOSTILE:
        expect_error(client, method, params, text)
        after = (claims(client), hhc_names(client), stats(client)["options"])
        expect(after == before, "nothing created, claimed or changed", {"before": before, "after": after})
    nolog = create(name="nolog", logs=None, policy="wb")
    expect(client.call("bdev_hhc_create", nolog) == "nolog", "a bdev without logs")
    expect_error(client, "bdev_hhc_set_policy", {"name": "nolog", "policy": "hhc"}, "needs at least one log")
    expect(client.call("bdev_hhc_delete", {"name": "nolog"}) is True, "deleted again")
    expect((claims(client), hhc_names(client), stats(client)["options"]) == before, "back as before")
    print(len(HOSTILE) + 1, "hostile requests refused")


def random_value(rng, depth=0):
    kind = rng.randrange(12 if depth < 2 else 9)
    if kind == 0:
        return rng.choice(["hhc0", "spare", "sparecache", "sparelog", "ssd", "back", "hdd0", "m8k", "tinylog",
                           "pt0", "pt0base", "nope", "", "h1", "fz"])
    if kind == 1:
        return "".join(chr(rng.choice([rng.randrange(0, 32), rng.randrange(32, 127), rng.randrange(128, 0x3000)]))
                       for _ in range(rng.choice([1, 5, 40, 254, 255, 256, 600])))
    if kind == 2:
        return rng.choice(["passthrough", "wt", "wb", "wb-flush", "wb-ordered", "hhc", "HHC", "lru", "cache",
                           "replay"])
    if kind == 3:
        return rng.choice([0, 1, -1, 2, 7, 100, 101, 512, 3000, 4096, 65536, 131072, 1 << 20, 1 << 31,
                           (1 << 32) - 1, 1 << 32, 1 << 63, 1 << 64, -(1 << 63)])
    if kind == 4:
        return rng.choice([0.5, -0.0, 1e300, 4096.0])
    if kind == 5:
        return rng.choice([None, True, False])
    if kind == 6:
        return rng.randrange(1 << 33)
    if kind == 7:
        return "fz%d" % rng.randrange(4)
    if kind == 8:
        return ""
    if kind in (9, 10):
        return [random_value(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 8, 9, 50]))]
    return {random_key(rng): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


KEYS = ["name", "backing", "cache", "logs", "policy", "block_size", "segment_size", "buffer_count",
        "dirty_threshold", "writeback_parallelism", "idle_after_ms", "seq_cutoff_threshold", "seq_cutoff_policy",
        "mode"]


def random_key(rng):
    return rng.choice(KEYS + ["", "Name", "x", "name\u0000", "log"])


METHODS = ["bdev_hhc_create", "bdev_hhc_delete", "bdev_hhc_get_bdevs", "bdev_hhc_get_stats",
           "bdev_hhc_reset_stats", "bdev_hhc_set_policy", "bdev_hhc_flush_all", "bdev_hhc_attach_log",
           "bdev_hhc_detach_log", "bdev_hhc_set_options", "bdev_hhc_recover"]


POLICIES = ["passthrough", "wt", "wb", "wb-flush", "wb-ordered", "hhc"]


def valid_request(rng, method):
    """A request that works (or names a bdev that may not exist yet)."""
    fz = "fz%d" % rng.randrange(3)
    if method == "bdev_hhc_create":
        return create(name=fz, policy=rng.choice(POLICIES))
    if method == "bdev_hhc_set_policy":
        return {"name": rng.choice(["hhc0", fz]), "policy": rng.choice(POLICIES)}
    if method == "bdev_hhc_delete":
        return {"name": fz}
    if method == "bdev_hhc_set_options":
        return {"name": rng.choice(["hhc0", fz]), "dirty_threshold": rng.randrange(1, 101),
                "writeback_parallelism": rng.randrange(1, 65), "idle_after_ms": rng.randrange(1, 200),
                "seq_cutoff_threshold": rng.choice([65536, 1 << 20, 4 << 20]),
                "seq_cutoff_policy": rng.choice(["never", "full", "always"])}
    if method == "bdev_hhc_recover":
        mode = rng.choice(["passthrough", "cache", "replay"])
        params = {"name": rng.choice(["hhc0", fz]), "mode": mode}
        if mode == "cache":
            params["cache"] = rng.choice(["sparecache", "spare", "m8k"])
        return params
    if method in ("bdev_hhc_attach_log", "bdev_hhc_detach_log"):
        return {"name": rng.choice(["hhc0", fz]), "log": rng.choice(["hdd0", "sparelog", "tinylog", "m8k"])}
    return {"name": rng.choice(["hhc0", fz])}


def random_request(rng):
    method = rng.choice(METHODS)
    near = rng.randrange(10)
    if near < 3:
        # Valid, or valid but for one key changed, dropped or added.
        params = valid_request(rng, method)
        if near > 0:
            key = rng.choice(list(params) + [random_key(rng)])
            if rng.randrange(3) == 0:
                params.pop(key, None)
            else:
                params[key] = random_value(rng)
        return method, params
    if near == 3:
        return method, random_value(rng)
    params = {}
    if rng.randrange(8):
        params["name"] = random_value(rng) if rng.randrange(3) else rng.choice(["hhc0", "fz0", "nope"])
    for _ in range(rng.randrange(6)):
        key = random_key(rng)
        params[key] = random_value(rng)
    return method, params


def guard(method, params):
    # The valid requests the load must not see: deleting hhc0, or using it
    # as another HHC bdev's device (a cache is formatted).
    if method == "bdev_hhc_delete" and params.get("name") == "hhc0":
        params["name"] = "fz0"
    if method == "bdev_hhc_create" and "hhc0" in json.dumps([params.get(k) for k in ("backing", "cache", "logs")]):
        params["backing"] = "nope"
    return params


def fuzz(client, count, seed="1"):
    """`count` generated requests, most malformed; then every HHC bdev but
    hhc0 is deleted, and hhc0 still answers."""
    import random
    rng = random.Random(int(seed))
    outcomes = {"ok": 0, "error": 0, "dropped": 0}
    for i in range(int(count)):
        method, params = random_request(rng)
        if isinstance(params, dict):
            params = guard(method, params)
        size = len(json.dumps(params))
        try:
            call(client, method, params)
            outcomes["ok"] += 1
        except (JSONRPCException, OSError) as e:
            lost = isinstance(e, OSError) or "Connection" in str(e) or "Timeout" in str(e)
            if not lost:
                outcomes["error"] += 1
                continue
            # SPDK's server drops a connection whose request exceeds its
            # 32 KiB receive buffer; anything else lost is the target's fault.
            expect(size > 30000, f"request {i} {method} {json.dumps(params)[:300]} broke the target: {e}")
            outcomes["dropped"] += 1
            client = JSONRPCClient(sys.argv[1], timeout=50)
        if rng.randrange(500) == 0:
            raw_garbage(client, rng)
    print("outcomes", outcomes)
    for name in hhc_names(client):
        if name != "hhc0":
            client.call("bdev_hhc_delete", {"name": name})
    s = stats(client)
    expect(hhc_names(client) == ["hhc0"] and s["state"] == "running", f"hhc0 alone and running ({s['policy']})")


def raw_garbage(client, rng):
    """Bytes that are not JSON-RPC, on a connection of their own."""
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    sock.sendall(rng.choice([b"{", b"[]", b"{\"jsonrpc\":\"2.0\",\"method\":5,\"id\":1}", b"\x00\xff" * 64,
                             b"{\"jsonrpc\":\"2.0\",\"method\":\"bdev_hhc_get_stats\",\"params\":{\"name\":\"hhc0\"}",
                             b"{\"jsonrpc\":\"1.0\",\"method\":\"bdev_hhc_flush_all\",\"id\":2,\"params\":[]}"]))
    sock.settimeout(0.5)
    try:
        sock.recv(4096)
    except OSError:
        pass
    sock.close()


def set_options(client):
    """Every option changed at once: the answer, get_stats' options and
    gauges show them; a partial change keeps the rest."""
    wanted = {"dirty_threshold": 45, "writeback_parallelism": 8, "idle_after_ms": 20,
              "seq_cutoff_threshold": 1 << 20, "seq_cutoff_policy": "always"}
    answer = client.call("bdev_hhc_set_options", dict(wanted, name="hhc0"))
    expect(answer == wanted, "set_options answers the options in force", answer)
    s = stats(client)
    expect(s["options"] == wanted, "get_stats shows them", s["options"])
    g = s["gauges"]
    expect((g["seq_cutoff_threshold_bytes"], g["seq_cutoff_policy"], g["dirty_threshold_percent"],
            g["writeback_parallelism"]) == (1 << 20, 2, 45, 8), "and the gauges", g)
    answer = client.call("bdev_hhc_set_options", {"name": "hhc0", "dirty_threshold": 50})
    expect(answer == dict(wanted, dirty_threshold=50), "a partial change keeps the rest", answer)


def cut_off(client, minimum, random_maximum=None):
    """The cutoff sent at least `minimum` writes past the cache (and, with
    `random_maximum`, no more than that many)."""
    c = stats(client)["counters"]
    print("cutoff counters", {k: v for k, v in c.items() if k.startswith("cutoff")})
    expect(c["cutoff_writes"] >= int(minimum), f"at least {minimum} writes cut off", c["cutoff_writes"])
    if random_maximum is not None:
        expect(c["cutoff_writes"] <= int(random_maximum), f"at most {random_maximum} writes cut off", c["cutoff_writes"])


def iostat(client, writes, reads_minimum):
    """SPDK's own counters of hhc0: exactly the `writes` 4 KiB writes
    issued, at least `reads_minimum` 4 KiB reads."""
    bdevs = client.call("bdev_get_iostat", {"name": "hhc0"})["bdevs"]
    io = next(b for b in bdevs if b["name"] == "hhc0")
    print("iostat", {k: io[k] for k in ("num_read_ops", "bytes_read", "num_write_ops", "bytes_written")})
    writes, reads_minimum = int(writes), int(reads_minimum)
    expect(io["num_write_ops"] == writes and io["bytes_written"] == writes * 4096, f"{writes} writes", io)
    expect(io["num_read_ops"] >= reads_minimum and io["bytes_read"] >= reads_minimum * 4096,
           f"at least {reads_minimum} reads", io)
    # The initiator's examine reads a few blocks of its own.
    expect(io["bytes_read"] <= (2 * reads_minimum + 256) * 4096, "not far more reads than issued", io)


def device(client, name):
    return next(d for d in stats(client)["devices"] if d["name"] == name)


def claimed(client, name):
    return client.call("bdev_get_bdevs", {"name": name})[0]["claimed"]


def log_mirrors(client):
    """hhc0 over logs hdd0 and hdd1: hdd1 detached; hdd0, the last one, is
    kept; a log too small, a device of hhc0 and no bdev are refused; hdd2
    attached in hdd1's slot, syncing (log_mirrors_synced goes on)."""
    expect(client.call("bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd1"}) is True, "hdd1 detached")
    d = device(client, "hdd1")
    expect(d["health"] == "detached" and d["mirror"] == "failed", "hdd1 detached, its mirror failed", d)
    expect(not claimed(client, "hdd1"), "hdd1 released")
    expect_error(client, "bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd0"}, "last healthy log mirror under policy hhc")
    expect_error(client, "bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd1"}, "no attached log mirror 'hdd1'")
    expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0", "policy": "wt", "log": "x"}, "invalid parameters")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": "smalllog"}, "the log needs")
    expect(not claimed(client, "smalllog"), "smalllog left unclaimed")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd0"}, "already a device of 'hhc0'")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": "ssd"}, "already a device of 'hhc0'")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": "nope"}, "no bdev named 'nope'")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": 5}, "invalid parameters")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0"}, "invalid parameters")
    expect_error(client, "bdev_hhc_attach_log", {"name": "nope", "log": "hdd2"}, "no HHC bdev named 'nope'")
    answer = client.call("bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd2"})
    expect(answer == {"index": 1, "mirror": "syncing"}, f"hdd2 attached in slot 1: {answer}")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd1"}, "log mirror slots of 'hhc0' are in use")


def log_mirrors_synced(client):
    """After log_mirrors and writes with flushes: hdd2 re-synced (it counts
    once the log head has moved past where it joined, which needs the log
    to move), then hdd0 may go."""
    deadline = time.time() + 60
    while time.time() < deadline and device(client, "hdd2")["mirror"] != "healthy":
        time.sleep(0.2)
    d = device(client, "hdd2")
    expect(d["mirror"] == "healthy" and d["segments_behind"] == 0, "hdd2 re-synced and healthy", d)
    expect(stats(client)["gauges"]["healthy_mirrors"] == 2, "two healthy mirrors")
    expect(client.call("bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd0"}) is True, "hdd0 may go now")


def wait_mirror_healthy(client, name, timeout_s=60):
    """Until log mirror `name` of hhc0 is re-synced (healthy)."""
    deadline = time.time() + float(timeout_s)
    while time.time() < deadline and device(client, name).get("mirror") != "healthy":
        time.sleep(0.2)
    d = device(client, name)
    expect(d.get("mirror") == "healthy", f"log mirror {name} healthy", d)


def logs_are(client, *names):
    """hhc0's log mirror slots hold these bdevs ("-" for an empty slot)."""
    infos = client.call("bdev_hhc_get_bdevs", {"name": "hhc0"})
    seen = [log["name"] if log["health"] == "ok" else "-" for log in infos[0]["logs"]]
    expect(seen == list(names), f"log mirror slots {list(names)}", infos)


def owner_on_core(client, name, core):
    """HHC bdev `name`'s owner thread (hhc_owner_*, named in its registered
    log line) is on reactor `core`, the RPCs' app thread on another."""
    reactors = client.call("framework_get_reactors")["reactors"]
    where = {t["name"]: r["lcore"] for r in reactors for t in r["lw_threads"]}
    owners = {n: c for n, c in where.items() if n.startswith("hhc_owner_")}
    expect(list(owners.values()) == [int(core)], f"one owner thread, on core {core}", where)
    expect(where.get("app_thread") != int(core), "the app thread on another core", where)


def off_owner(client):
    """Every operator RPC on hhc0, whose owner thread is not the RPCs'
    thread: each answered from the owner (never "owned by another thread")."""
    def answer(method, params):
        try:
            result = client.call(method, params)
        except JSONRPCException as e:
            expect(False, f"{method} answered", str(e))
        print(method, json.dumps(result)[:200])
        return result
    s = answer("bdev_hhc_get_stats", {"name": "hhc0"})
    expect(s["state"] == "running" and s["counters"]["writes"] > 0, "get_stats from the owner", s)
    expect(answer("bdev_hhc_reset_stats", {"name": "hhc0"}) is True, "reset_stats")
    expect(stats(client)["counters"]["writes"] == 0, "counters reset")
    answer("bdev_hhc_set_policy", {"name": "hhc0", "policy": "wt"})
    wait_switched(client, "wt", 60)
    answer("bdev_hhc_set_policy", {"name": "hhc0", "policy": "hhc"})
    wait_switched(client, "hhc", 60)
    answer("bdev_hhc_flush_all", {"name": "hhc0"})
    o = answer("bdev_hhc_set_options", {"name": "hhc0", "dirty_threshold": 40})
    expect(o["dirty_threshold"] == 40, "set_options", o)
    expect(answer("bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd1"}) is True, "detach_log")
    a = answer("bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd1"})
    expect(a == {"index": 1, "mirror": "syncing"}, "attach_log", a)
    infos = answer("bdev_hhc_get_bdevs", {})
    expect(len(infos) == 1 and infos[0]["state"] == "running", "get_bdevs from the owner", infos)
    expect_error(client, "bdev_hhc_get_stats", {"name": "nope"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd0"}, "already a device of 'hhc0'")
    # The bdev layer's own callback, on the app thread: the owner's last
    # published view, not "busy".
    deadline = time.time() + 60
    while time.time() < deadline:
        info = client.call("bdev_get_bdevs", {"name": "hhc0"})[0]["driver_specific"]["hhc"]
        if info.get("policy") == "hhc" and info.get("state") == "running":
            break
        time.sleep(0.2)
    expect(info.get("state") == "running" and info.get("policy") == "hhc", "bdev_get_bdevs shows the owner's view", info)


def recovery(client):
    s = stats(client)
    return s, s.get("recovery")


def wait_recovered(client, timeout_s=60):
    """After the cache bdev went: the record shows the replay going forward
    and ending done, blocks replayed, the last barrier; the HHC bdev itself
    is gone from the bdev layer; get_bdevs shows the record."""
    deadline = time.time() + float(timeout_s)
    stages = []
    while time.time() < deadline:
        s, r = recovery(client)
        if r is not None and (not stages or stages[-1] != r["stage"]):
            stages.append(r["stage"])
            print("recovery", s["state"], r)
        if s["state"] in ("recovered", "recovery_failed"):
            break
        time.sleep(0.02)
    print("stages seen", stages)
    expect(s["state"] == "recovered" and r["stage"] == "done" and r["error"] is None, "replay done", s)
    expect(r["blocks_replayed"] > 0 and r["blocks_replayed"] == r["blocks_total"], "blocks replayed", r)
    expect(isinstance(r["last_barrier_sequence"], int) and r["parts_replayed"] > 0
           and r["parts_scanned"] >= r["parts_replayed"], "the last barrier found", r)
    expect(all(st in ("scanning", "replaying", "done") for st in stages), "stages known", stages)
    expect_error(client, "bdev_get_bdevs", {"name": "hhc0"}, "No such device")
    infos = client.call("bdev_hhc_get_bdevs", {"name": "hhc0"})
    expect(infos[0]["state"] == "recovered" and infos[0]["recovery"] == r, "get_bdevs shows the record", infos)
    expect(infos[0]["cache"]["health"] == "removed", "the cache is removed", infos)


def wait_recovery_failed(client, timeout_s=60):
    """The replay could not write to the backing bdev: the record says so,
    names the block, and keeps the HHC bdev away from the bdev layer."""
    deadline = time.time() + float(timeout_s)
    while time.time() < deadline:
        s, r = recovery(client)
        if s["state"] in ("recovered", "recovery_failed"):
            break
        time.sleep(0.02)
    print("recovery", s["state"], r)
    expect(s["state"] == "recovery_failed" and r["stage"] == "failed", "the replay failed", s)
    expect("to the backing device failed" in (r["error"] or ""), "the error names the backing write", r)
    expect(r["blocks_replayed"] < r["blocks_total"], "not every block replayed", r)
    expect_error(client, "bdev_get_bdevs", {"name": "hhc0"}, "No such device")
    for mode, text in (("passthrough", "mode replay runs the replay again"), ("cache", "not all on the backing bdev")):
        params = {"name": "hhc0", "mode": mode}
        if mode == "cache":
            params["cache"] = "sparecache"
        expect_error(client, "bdev_hhc_recover", params, text)


def replay_again(client):
    """bdev_hhc_recover replay runs a failed replay again."""
    answer = client.call("bdev_hhc_recover", {"name": "hhc0", "mode": "replay"})
    expect(answer in ("recovering", "recovered"), "the replay runs again", answer)
    wait_recovered(client)


def still_recovered(client):
    s, r = recovery(client)
    expect(s["state"] == "recovered" and r["stage"] == "done", "nothing changed: still recovered", s)
    expect_error(client, "bdev_get_bdevs", {"name": "hhc0"}, "No such device")


def recover_refusals(client, backing, log):
    """Refusals on a record whose replay is done; each changes nothing."""
    cases = [
        ({"name": "nope", "mode": "passthrough"}, "no HHC bdev named 'nope'"),
        ({"name": "hhc0", "mode": "fast"}, "unknown mode"),
        ({"name": "hhc0", "mode": "cache"}, "needs the fresh cache bdev"),
        ({"name": "hhc0", "mode": "passthrough", "cache": "ssd2"}, "only mode cache"),
        ({"name": "hhc0", "mode": "replay"}, "replayed already"),
        ({"name": "hhc0", "mode": "cache", "cache": "nope"}, "cache: no bdev named 'nope'"),
        ({"name": "hhc0", "mode": "cache", "cache": backing}, f"bdev '{backing}' is given both as backing and as cache"),
        ({"name": "hhc0", "mode": "cache", "cache": log}, f"bdev '{log}' is given both as cache and as logs"),
        ({"name": "hhc0", "mode": "cache", "cache": "hhc0"}, "is the name of the HHC bdev itself"),
        ({"name": "hhc0", "mode": "cache", "cache": "m8k"}, "cache bdev 'm8k' has block size 8192"),
        ({"name": "hhc0", "mode": "cache", "cache": "pt0base"}, "cache: bdev 'pt0base' is already claimed"),
    ]
    for params, text in cases:
        expect_error(client, "bdev_hhc_recover", params, text)
        still_recovered(client)
    expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0", "policy": "wt"}, "lost its cache bdev")
    expect_error(client, "bdev_hhc_flush_all", {"name": "hhc0"}, "lost its cache bdev")
    expect_error(client, "bdev_hhc_create", {"name": "hhc0", "backing": backing, "cache": "ssd", "logs": [log]},
                 "lost its cache bdev")
    expect(not claimed(client, "m8k") and claimed(client, backing), "m8k unclaimed; the record holds the backing")
    still_recovered(client)


def recovered_as(client, policy, cache=None):
    s = stats(client)
    expect(s["state"] == "running" and s["policy"] == policy and "recovery" not in s, f"running as {policy}", s)
    roles = {d["role"]: d["name"] for d in s["devices"]}
    expect(roles.get("cache") == cache, f"cache {cache}", s["devices"])
    if cache is None:
        expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0", "policy": "wb"}, "without a cache")


def main():
    client = JSONRPCClient(sys.argv[1], timeout=50)
    check = globals()[sys.argv[2].replace("-", "_")]
    check(client, *sys.argv[3:])


if __name__ == "__main__":
    main()
