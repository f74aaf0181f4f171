/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * The narrow C API between the HHC bdev module's C shim (the .c files of
 * spdk-glue/ but hhc_tgt.c; hhc_glue_internal.h lists them) and its
 * Rust side (src/ffi/). bindgen runs over this header only, so it holds
 * nothing but opaque handles, plain integers and pointers: Rust never depends
 * on the layout of an SPDK structure.
 *
 * Functions named hhc_glue_* are implemented in C and called from Rust;
 * functions named hhc_rs_* are implemented in Rust and called from C.
 * Unless stated otherwise, every call happens on an SPDK thread.
 */

#ifndef HHC_GLUE_H
#define HHC_GLUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Log mirrors per HHC bdev accepted by bdev_hhc_create. */
#define HHC_GLUE_MAX_LOGS 8

/* An integer parameter that the RPC caller left out. */
#define HHC_GLUE_UNSET UINT32_MAX
#define HHC_GLUE_UNSET64 UINT64_MAX

/* The HHC bdev as the bdev layer sees it (an spdk_bdev plus its io_device). */
struct hhc_glue_node;
/* One opened and claimed base bdev (backing, cache or log mirror). */
struct hhc_glue_base;
/* The per-I/O contexts shared by the bases of one HHC bdev. */
struct hhc_glue_io_pool;
struct hhc_glue_lane;
/* One upper-layer bdev I/O (an spdk_bdev_io). */
struct hhc_glue_io;
/* A JSON-RPC request waiting for its answer. */
struct hhc_glue_rpc;
/* A JSON writer handed to dump_info_json / write_config_json. */
struct hhc_glue_json;
/* A poller registered by Rust. */
struct hhc_glue_poller;

enum hhc_glue_io_kind {
	HHC_GLUE_IO_READ = 0,
	HHC_GLUE_IO_WRITE = 1,
	HHC_GLUE_IO_FLUSH = 2,
	/* Completes once every request before it is done (lba and count 0). */
	HHC_GLUE_IO_RESET = 3,
};

/* The operator RPCs that take a bdev name (and maybe one string argument). */
enum hhc_glue_control {
	HHC_GLUE_CONTROL_GET_STATS = 0,
	HHC_GLUE_CONTROL_RESET_STATS = 1,
	/* arg: the policy name. */
	HHC_GLUE_CONTROL_SET_POLICY = 2,
	HHC_GLUE_CONTROL_FLUSH_ALL = 3,
	/* arg: the log bdev's name. */
	HHC_GLUE_CONTROL_ATTACH_LOG = 4,
	HHC_GLUE_CONTROL_DETACH_LOG = 5,
};

enum hhc_glue_log_level {
	HHC_GLUE_LOG_ERROR = 0,
	HHC_GLUE_LOG_WARN = 1,
	HHC_GLUE_LOG_NOTICE = 2,
	HHC_GLUE_LOG_INFO = 3,
	HHC_GLUE_LOG_DEBUG = 4,
};

/* The options bdev_hhc_set_options changes online; bdev_hhc_create takes
 * them too. Numbers are HHC_GLUE_UNSET (HHC_GLUE_UNSET64) and the policy
 * NULL when left out. */
struct hhc_glue_options {
	uint32_t dirty_threshold;
	uint32_t writeback_parallelism;
	uint32_t idle_after_ms;
	uint64_t seq_cutoff_threshold;
	const char *seq_cutoff_policy;
};

/* bdev_hhc_create parameters as decoded from JSON; strings are owned by C
 * and valid for the duration of hhc_rs_create only. */
struct hhc_glue_create_params {
	const char *name;
	const char *backing;
	const char *cache;
	const char *logs[HHC_GLUE_MAX_LOGS];
	size_t logs_count;
	/* NULL when left out. */
	const char *policy;
	/* The cores the bdev's owner thread may run on; NULL when left out. */
	const char *cpumask;
	/* HHC_GLUE_UNSET when left out. */
	uint32_t block_size;
	uint32_t segment_size;
	uint32_t buffer_count;
	uint32_t barrier_gap;
	uint32_t backing_stripe;
	uint32_t log_timeout_ms;
	struct hhc_glue_options options;
	/* Replay the log the log bdevs hold (another host's) onto the backing
	 * bdev first, then format the cache and the logs (a takeover). */
	bool takeover;
};

/* Facts about a base bdev, read once after it was opened. */
struct hhc_glue_base_info {
	uint32_t block_size;
	uint64_t blocks_count;
	/* log2 of the buffer alignment the bdev needs. */
	uint32_t required_alignment_log2;
	bool supports_flush;
	bool volatile_write_cache;
	/* Blocks per stripe the bdev prefers I/O not to cross (a RAID's
	 * stripe), 0 if none. */
	uint32_t optimal_io_boundary;
};

/* ---- implemented in C ---- */

/* Whether a bdev (or alias) of this name exists. */
bool hhc_glue_bdev_exists(const char *name);
/* Opens `name` for writing and claims it for module hhc. `rs_base` comes
 * back in hhc_rs_base_io_done and hhc_rs_base_removed. Returns 0 or a
 * negative errno (-ENODEV: no such bdev, -EPERM: already claimed). */
int hhc_glue_base_open(const char *name, void *rs_base, struct hhc_glue_base **out);
void hhc_glue_base_get_info(const struct hhc_glue_base *base, struct hhc_glue_base_info *info);
/* Gets the I/O channel of the calling thread; it is used for every I/O. */
int hhc_glue_base_get_channel(struct hhc_glue_base *base);
/* The per-I/O contexts of one HHC bdev's bases, `count` of them allocated
 * now: as many as its engine can have device commands in flight. NULL when
 * out of memory. The creator holds one reference, each base using it one. */
struct hhc_glue_io_pool *hhc_glue_io_pool_create(uint32_t count);
void hhc_glue_io_pool_put(struct hhc_glue_io_pool *pool);
uint32_t hhc_glue_io_pool_in_use(const struct hhc_glue_io_pool *pool);
/* Once per base, before its first I/O. */
void hhc_glue_base_use_pool(struct hhc_glue_base *base, struct hhc_glue_io_pool *pool);
/* Starts one I/O at a byte offset. The iovec array is copied. Returns 0 when
 * the I/O was accepted (it then completes exactly once through
 * hhc_rs_base_io_done, possibly after -ENOMEM waits), else a negative errno
 * and nothing was started. */
int hhc_glue_base_submit(struct hhc_glue_base *base, enum hhc_glue_io_kind kind, uint64_t offset_bytes,
			 uint64_t len_bytes, const struct iovec *iovs, int iovs_count, uint64_t tag);
/* A lane: the calling thread's own channels to the backing (slot 0) and
 * cache (slot 1) bdevs of one HHC bdev, for the device commands of the
 * requests submitted on that thread, and `count` I/O contexts of its own;
 * one per channel of the HHC bdev (hhc_node.c). `rs_channel` comes back in
 * hhc_rs_lane_io_done. Created and destroyed on its thread; destroyed with
 * no I/O in flight. */
#define HHC_GLUE_LANE_SLOTS 2
/* Commands a lane has in flight at most; past that they go out on the
 * owner's channels. */
#define HHC_GLUE_LANE_COMMANDS 512
struct hhc_glue_lane *hhc_glue_lane_create(void *rs_channel, uint32_t count);
void hhc_glue_lane_destroy(struct hhc_glue_lane *lane);
/* The bdev of `slot` is going: the lane gives its channel back once its
 * commands there are done, and takes none again. */
void hhc_glue_lane_drop(struct hhc_glue_lane *lane, uint32_t slot);
/* Calls hhc_rs_channel_update for every channel of the HHC bdev, each on
 * its own thread and in turn (a channel answering 0 holds the iteration
 * until it calls hhc_glue_channels_answer with the iterator it was given),
 * then hhc_rs_node_channels_updated on the calling thread. */
void hhc_glue_node_update_channels(struct hhc_glue_node *node);
void hhc_glue_channels_answer(void *iter);
/* As hhc_glue_base_submit, on the lane's channel for `slot` of `base`
 * (taken at first use) and completing through hhc_rs_lane_io_done on the
 * calling thread; but the command is only taken here and starts at the
 * lane's next hhc_glue_lane_start, so that a thread copies its data after
 * it has left the node (other threads may enter meanwhile). -EAGAIN: not
 * taken (no free context, no channel, the base closing); the caller starts
 * it elsewhere. */
int hhc_glue_lane_submit(struct hhc_glue_lane *lane, uint32_t slot, struct hhc_glue_base *base,
			 enum hhc_glue_io_kind kind, uint64_t offset_bytes, uint64_t len_bytes,
			 const struct iovec *iovs, int iovs_count, uint64_t tag);
/* Starts the commands the lane took, in order; one that cannot start
 * completes with -EIO through a message to this thread. */
void hhc_glue_lane_start(struct hhc_glue_lane *lane);
/* A request of the HHC bdev, on the lane's thread, sent as it is to the
 * backing bdev at a byte offset, as bdev_passthru does (-ENOMEM from the
 * backing bdev waits in spdk_bdev_queue_io_wait); it completes through
 * hhc_rs_bypass_done on this thread. 0: started; 1: nothing to do (a FLUSH
 * the backing bdev does not support); -EAGAIN: not started, the caller
 * takes the usual path; another negative errno: not started. */
int hhc_glue_lane_bypass(struct hhc_glue_lane *lane, struct hhc_glue_base *backing, struct hhc_glue_io *io,
			 enum hhc_glue_io_kind kind, uint64_t offset_bytes, uint64_t len_bytes);
/* Releases the claim and closes the bdev once its I/Os have completed.
 * Afterwards no callback names this base again. */
void hhc_glue_base_close(struct hhc_glue_base *base);

/* Registers the HHC bdev and its io_device. `rs_node` comes back in every
 * hhc_rs_* call about it. The bdev's UUID derives from `instance_id` (the
 * cache device's), so it stays the same across restarts. */
/* max_rw_blocks: the bdev layer splits longer reads and writes. */
int hhc_glue_node_register(const char *name, uint32_t block_size, uint64_t blocks_count,
			   uint32_t required_alignment_log2, uint32_t max_rw_blocks, uint64_t instance_id,
			   void *rs_node, struct hhc_glue_node **out);
/* Starts unregistration; hhc_rs_node_destruct follows. */
void hhc_glue_node_unregister(struct hhc_glue_node *node);
/* Ends an asynchronous destruct; frees the node once the io_device is gone. */
void hhc_glue_node_destruct_done(struct hhc_glue_node *node);

/* The data buffers of an upper-layer I/O (valid until it completes). */
/* Completes an upper-layer I/O: 0, -ENOMEM (the bdev layer retries) or
 * another negative errno. Must run on the thread that submitted it. */
void hhc_glue_io_complete(struct hhc_glue_io *io, int status);

/* Period 0 polls on every reactor iteration. `poll` returns > 0 when it did
 * work. */
struct hhc_glue_poller *hhc_glue_poller_start(int (*poll)(void *arg), void *arg, uint64_t period_us);
void hhc_glue_poller_stop(struct hhc_glue_poller *poller);

/* The calling SPDK thread (opaque, for comparisons only). */
const void *hhc_glue_thread_current(void);
/* Runs fn(arg) on `thread` later; returns 0 or a negative errno. */
int hhc_glue_thread_send(const void *thread, void (*fn)(void *arg), void *arg);
/* The app thread: the one that runs the RPCs and registers bdevs. */
const void *hhc_glue_thread_app(void);
/* A new SPDK thread that may run on the cores of `cpumask` (SPDK's
 * syntax: "0x2", "[1,3-4]"); -EINVAL if it does not parse, -EDOM if it
 * names no core of this application, -ENOMEM. Threads are never destroyed
 * here: the reactors end them when the application stops. */
int hhc_glue_thread_create(const char *name, const char *cpumask, const void **out);
/* "name (id N)" of a thread, for messages; `out` holds `len` bytes. */
void hhc_glue_thread_describe(const void *thread, char *out, size_t len);
/* Monotonic time in nanoseconds. */
uint64_t hhc_glue_now_ns(void);
/* DMA-safe, zeroed memory aligned to `align_bytes`; NULL when exhausted. */
void *hhc_glue_dma_zmalloc(size_t len_bytes, size_t align_bytes);
void hhc_glue_dma_free(void *buffer);

/* Logs one line through the SPDK log component "hhc"; DEBUG lines show only
 * with --logflag hhc. */
void hhc_glue_log(enum hhc_glue_log_level level, const char *message);

/* Writes `name: <raw JSON text>` (name NULL: just the value). */
void hhc_glue_json_write_raw(struct hhc_glue_json *json, const char *name, const char *text, size_t len);

/* Answers a JSON-RPC request with raw JSON text (a value). */
void hhc_glue_rpc_reply_raw(struct hhc_glue_rpc *rpc, const char *text, size_t len);
/* Answers with an error: `code` is a JSON-RPC code or a negative errno. */
void hhc_glue_rpc_reply_error(struct hhc_glue_rpc *rpc, int code, const char *message);
/* Unregisters HHC bdev `name` and answers `rpc` (true, or the error) once
 * it is gone; any thread (the answer comes on the calling one). */
void hhc_glue_bdev_delete(const char *name, struct hhc_glue_rpc *rpc);

/* Unregisters HHC bdev `name`; `cb(arg, rc)` runs on the calling thread once
 * it is gone. Non-zero: not started (no such HHC bdev), cb not called. */
int hhc_glue_bdev_unregister(const char *name, void (*cb)(void *arg, int rc), void *arg);

/* Keeps the shim's object file in a link that references nothing else in it. */
int hhc_glue_anchor(void);

/* ---- implemented in Rust ---- */

/* bdev_hhc_create: the Rust side answers `rpc` exactly once, maybe later. */
void hhc_rs_create(const struct hhc_glue_create_params *params, struct hhc_glue_rpc *rpc);
/* bdev_hhc_get_bdevs (name may be NULL: all). bdev_hhc_delete is handled in C. */
void hhc_rs_get_bdevs(const char *name, struct hhc_glue_rpc *rpc);
/* bdev_hhc_get_stats, _reset_stats, _set_policy, _flush_all, _attach_log,
 * _detach_log: `name` and
 * `arg` (NULL unless the RPC has one) are valid for this call only; `rpc`
 * is answered exactly once, maybe later. */
void hhc_rs_control(enum hhc_glue_control op, const char *name, const char *arg, struct hhc_glue_rpc *rpc);
/* bdev_hhc_set_options: `name` and `options` are valid for this call only;
 * `rpc` is answered exactly once. */
void hhc_rs_set_options(const char *name, const struct hhc_glue_options *options, struct hhc_glue_rpc *rpc);
/* bdev_hhc_recover; `cache` may be NULL. */
void hhc_rs_recover(const char *name, const char *mode, const char *cache, struct hhc_glue_rpc *rpc);
/* bdev_hhc_delete: on the bdev's owner thread, drops a record of a lost
 * cache (no bdev) or hands the rest to hhc_glue_bdev_delete. */
void hhc_rs_delete(const char *name, struct hhc_glue_rpc *rpc);
/* bdev_hhc_forget: units 0..3 of cache bdev `cache`, opened and claimed by
 * the module, were read into `units`. True: wipe them (zeros) and call
 * hhc_rs_forget_done; false: `rpc` was answered (a refusal). */
bool hhc_rs_forget_check(const char *cache, const uint8_t *units, size_t len, bool force,
			 struct hhc_glue_rpc *rpc);
/* The wipe of bdev_hhc_forget went (ok) or failed; answers `rpc`. */
void hhc_rs_forget_done(const char *cache, bool ok, struct hhc_glue_rpc *rpc);
/* examine: a bdev arrived (config), and unit 0 of an unclaimed one (disk). */
void hhc_rs_examine_config(const char *name);
void hhc_rs_examine_disk(const char *name, const uint8_t *unit, size_t len);
/* Module teardown: every HHC bdev is gone by now. */
void hhc_rs_module_fini(void);

/* A base I/O (a bypassed request) is back: `status` 0 or a negative errno,
 * `latency_ns` from its submission to now, by hhc_glue_now_ns. */
void hhc_rs_base_io_done(void *rs_base, uint64_t tag, int status, enum hhc_glue_io_kind kind, uint64_t latency_ns);
void hhc_rs_base_removed(void *rs_base);
void hhc_rs_lane_io_done(void *rs_channel, uint64_t tag, int status, enum hhc_glue_io_kind kind, uint64_t latency_ns);
void hhc_rs_bypass_done(void *rs_channel, struct hhc_glue_io *io, enum hhc_glue_io_kind kind, int status,
			uint64_t latency_ns);
int hhc_rs_channel_update(void *rs_channel, void *iter);
void hhc_rs_node_channels_updated(void *rs_node);

/* bdev fn table. */
/* iovs: the request's buffers (NULL for FLUSH and RESET), valid until it completes. */
void hhc_rs_node_submit(void *rs_node, void *rs_channel, struct hhc_glue_io *io, enum hhc_glue_io_kind kind,
			uint64_t lba, uint64_t blocks_count, const struct iovec *iovs, int iovs_count);
/* Returns 1 when the destruct finishes later through hhc_glue_node_destruct_done. */
int hhc_rs_node_destruct(void *rs_node);
void hhc_rs_node_dump_info(void *rs_node, struct hhc_glue_json *json);
void hhc_rs_node_write_config(void *rs_node, struct hhc_glue_json *json);

/* Per-thread channel of an HHC bdev. */
void *hhc_rs_channel_create(void *rs_node, struct hhc_glue_lane *lane);
void hhc_rs_channel_destroy(void *rs_channel);
int hhc_rs_channel_poll(void *rs_channel);

/* ---- the test device-model bdev (module hhc_model, hhc_model.c; Rust: src/ffi/model/) ---- */

/* Parameter overrides bdev_hhc_model_create accepts. */
#define HHC_GLUE_MODEL_MAX_PARAMS 32

/* A device model (`kind` "hdd", "ssd" or "raid5") with `count` overrides
 * (`keys[i]` = `values[i]`) of the profile's defaults; NULL, with a message
 * in `error` (NUL-terminated, cut to `error_len`), when the kind, a key or
 * a value is bad. Any thread. */
void *hhc_rs_model_new(const char *kind, const char *const *keys, const double *values, size_t count,
		       char *error, size_t error_len);
void hhc_rs_model_free(void *rs_model);
/* A command arrives now (read under the model's lock, written to
 * `submit_ns`); returns when the model completes it (hhc_glue_now_ns time,
 * >= *submit_ns). RESET is not a model command. Any thread. */
uint64_t hhc_rs_model_submit(void *rs_model, enum hhc_glue_io_kind kind, uint64_t offset_bytes,
			     uint64_t len_bytes, uint64_t *submit_ns);
/* The command submitted at `submit_ns` completed upward at `completed_ns`;
 * its base I/O was done at `base_done_ns`. */
void hhc_rs_model_complete(void *rs_model, uint64_t submit_ns, uint64_t base_done_ns, uint64_t completed_ns);
/* `pieces` more writes went to the model inside the last one submitted (a
 * plug's): each completes on its own. */
void hhc_rs_model_gathered(void *rs_model, uint32_t pieces);
/* A RAID5 model's data bytes per stripe; 0 for the other kinds. */
uint64_t hhc_rs_model_stripe_bytes(void *rs_model);
/* bdev_hhc_model_get_stats; rs_model NULL: no such bdev (answers the error). */
void hhc_rs_model_get_stats(void *rs_model, const char *name, struct hhc_glue_rpc *rpc);

#endif /* HHC_GLUE_H */
