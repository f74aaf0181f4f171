/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * The JSON-RPC methods of module hhc: bdev_hhc_create, bdev_hhc_delete,
 * bdev_hhc_get_bdevs, the operator RPCs (get_stats, reset_stats,
 * set_policy, set_options, flush_all, attach_log, detach_log),
 * bdev_hhc_recover, and their parameter decoders (the answers Rust sends are
 * in hhc_common.c).
 */

#include "hhc_glue_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spdk/bdev.h"
#include "spdk/json.h"
#include "spdk/jsonrpc.h"
#include "spdk/rpc.h"
#include "spdk/string.h"
#include "spdk/util.h"

struct rpc_create {
	char *name;
	char *backing;
	char *cache;
	char *logs[HHC_GLUE_MAX_LOGS];
	size_t logs_count;
	char *policy;
	char *cpumask;
	uint32_t block_size;
	uint32_t segment_size;
	uint32_t buffer_count;
	uint32_t barrier_gap;
	uint32_t backing_stripe;
	uint32_t log_timeout_ms;
	uint32_t dirty_threshold;
	uint32_t writeback_parallelism;
	uint32_t idle_after_ms;
	uint64_t seq_cutoff_threshold;
	char *seq_cutoff_policy;
	bool takeover;
};

static int
decode_logs(const struct spdk_json_val *val, void *out)
{
	struct rpc_create *req = SPDK_CONTAINEROF(out, struct rpc_create, logs);

	return spdk_json_decode_array(val, spdk_json_decode_string, req->logs, HHC_GLUE_MAX_LOGS,
				      &req->logs_count, sizeof(char *));
}

static const struct spdk_json_object_decoder g_rpc_create_decoders[] = {
	{"name", offsetof(struct rpc_create, name), spdk_json_decode_string},
	{"backing", offsetof(struct rpc_create, backing), spdk_json_decode_string},
	{"cache", offsetof(struct rpc_create, cache), spdk_json_decode_string, true},
	{"logs", offsetof(struct rpc_create, logs), decode_logs, true},
	{"policy", offsetof(struct rpc_create, policy), spdk_json_decode_string, true},
	{"cpumask", offsetof(struct rpc_create, cpumask), spdk_json_decode_string, true},
	{"block_size", offsetof(struct rpc_create, block_size), spdk_json_decode_uint32, true},
	{"segment_size", offsetof(struct rpc_create, segment_size), spdk_json_decode_uint32, true},
	{"buffer_count", offsetof(struct rpc_create, buffer_count), spdk_json_decode_uint32, true},
	{"barrier_gap", offsetof(struct rpc_create, barrier_gap), spdk_json_decode_uint32, true},
	{"backing_stripe", offsetof(struct rpc_create, backing_stripe), spdk_json_decode_uint32, true},
	{"log_timeout_ms", offsetof(struct rpc_create, log_timeout_ms), spdk_json_decode_uint32, true},
	{"dirty_threshold", offsetof(struct rpc_create, dirty_threshold), spdk_json_decode_uint32, true},
	{"writeback_parallelism", offsetof(struct rpc_create, writeback_parallelism), spdk_json_decode_uint32, true},
	{"idle_after_ms", offsetof(struct rpc_create, idle_after_ms), spdk_json_decode_uint32, true},
	{"seq_cutoff_threshold", offsetof(struct rpc_create, seq_cutoff_threshold), spdk_json_decode_uint64, true},
	{"seq_cutoff_policy", offsetof(struct rpc_create, seq_cutoff_policy), spdk_json_decode_string, true},
	{"takeover", offsetof(struct rpc_create, takeover), spdk_json_decode_bool, true},
};

static void
rpc_create_free(struct rpc_create *req)
{
	size_t i;

	free(req->name);
	free(req->backing);
	free(req->cache);
	free(req->policy);
	free(req->cpumask);
	free(req->seq_cutoff_policy);
	for (i = 0; i < req->logs_count; i++) {
		free(req->logs[i]);
	}
}

static void
rpc_bdev_hhc_create(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_create req = {
		.block_size = HHC_GLUE_UNSET,
		.segment_size = HHC_GLUE_UNSET,
		.buffer_count = HHC_GLUE_UNSET,
		.barrier_gap = HHC_GLUE_UNSET,
		.backing_stripe = HHC_GLUE_UNSET,
		.log_timeout_ms = HHC_GLUE_UNSET,
		.dirty_threshold = HHC_GLUE_UNSET,
		.writeback_parallelism = HHC_GLUE_UNSET,
		.idle_after_ms = HHC_GLUE_UNSET,
		.seq_cutoff_threshold = HHC_GLUE_UNSET64,
	};
	struct hhc_glue_create_params p = {0};
	size_t i;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_create_decoders,
			SPDK_COUNTOF(g_rpc_create_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name, backing (strings); optional cache "
						 "(string; only policy passthrough without logs goes without one), logs "
						 "(array of at most 8 bdev names), policy, cpumask (strings), block_size, "
						 "segment_size, buffer_count, barrier_gap, backing_stripe, log_timeout_ms, dirty_threshold, "
						 "writeback_parallelism, "
						 "idle_after_ms, seq_cutoff_threshold (unsigned integers), "
						 "seq_cutoff_policy (string), takeover (boolean); no other keys");
		rpc_create_free(&req);
		return;
	}
	p.name = req.name;
	p.backing = req.backing;
	p.cache = req.cache;
	for (i = 0; i < req.logs_count; i++) {
		p.logs[i] = req.logs[i];
	}
	p.logs_count = req.logs_count;
	p.policy = req.policy;
	p.cpumask = req.cpumask;
	p.block_size = req.block_size;
	p.segment_size = req.segment_size;
	p.buffer_count = req.buffer_count;
	p.barrier_gap = req.barrier_gap;
	p.backing_stripe = req.backing_stripe;
	p.log_timeout_ms = req.log_timeout_ms;
	p.options.dirty_threshold = req.dirty_threshold;
	p.options.writeback_parallelism = req.writeback_parallelism;
	p.options.idle_after_ms = req.idle_after_ms;
	p.options.seq_cutoff_threshold = req.seq_cutoff_threshold;
	p.options.seq_cutoff_policy = req.seq_cutoff_policy;
	p.takeover = req.takeover;
	hhc_rs_create(&p, (struct hhc_glue_rpc *)request);
	rpc_create_free(&req);
}
SPDK_RPC_REGISTER("bdev_hhc_create", rpc_bdev_hhc_create, SPDK_RPC_RUNTIME)

static void
rpc_bdev_hhc_delete(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_name req = {0};

	if (params == NULL || spdk_json_decode_object(params, g_rpc_name_decoders,
			SPDK_COUNTOF(g_rpc_name_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name (string)");
		free(req.name);
		return;
	}
	/* Rust decides on the bdev's owner thread: an HHC bdev that lost its
	 * cache is a record without a bdev; others go by hhc_glue_bdev_delete. */
	hhc_rs_delete(req.name, (struct hhc_glue_rpc *)request);
	free(req.name);
}

void
hhc_glue_bdev_delete(const char *name, struct hhc_glue_rpc *rpc)
{
	struct spdk_jsonrpc_request *request = (struct spdk_jsonrpc_request *)rpc;
	int rc;

	rc = spdk_bdev_unregister_by_name(name, &g_hhc_module, rpc_delete_cb, request);
	if (rc != 0) {
		spdk_jsonrpc_send_error_response_fmt(request, rc,
						     "no HHC bdev named '%s': %s (a cache bdev that still holds its owner "
						     "record assembles it again at the next start: bdev_hhc_forget makes the "
						     "cache forget it)", name, spdk_strerror(-rc));
	}
}
SPDK_RPC_REGISTER("bdev_hhc_delete", rpc_bdev_hhc_delete, SPDK_RPC_RUNTIME)

int
hhc_glue_bdev_unregister(const char *name, void (*cb)(void *arg, int rc), void *arg)
{
	return spdk_bdev_unregister_by_name(name, &g_hhc_module, cb, arg);
}

/* bdev_hhc_forget {cache, force?}: wipes the HHC superblock and owner
 * record of an unused cache bdev, so that no start assembles its HHC bdev
 * again. Rust decides (hhc_rs_forget_check) from the units read. */
#define HHC_FORGET_BYTES (3 * 4096)

struct rpc_forget {
	char *cache;
	bool force;
};

static const struct spdk_json_object_decoder g_rpc_forget_decoders[] = {
	{"cache", offsetof(struct rpc_forget, cache), spdk_json_decode_string},
	{"force", offsetof(struct rpc_forget, force), spdk_json_decode_bool, true},
};

struct hhc_forget {
	struct spdk_jsonrpc_request *request;
	struct spdk_bdev_desc *desc;
	struct spdk_io_channel *channel;
	bool claimed;
	void *buf;
	uint64_t len;
	char *cache;
	bool force;
};

static void
forget_event_cb(enum spdk_bdev_event_type type, struct spdk_bdev *bdev, void *ctx)
{
	/* The I/O in flight completes (with an error) if the bdev goes. */
}

static void
forget_free(struct hhc_forget *forget)
{
	if (forget->channel != NULL) {
		spdk_put_io_channel(forget->channel);
	}
	if (forget->claimed) {
		spdk_bdev_module_release_bdev(spdk_bdev_desc_get_bdev(forget->desc));
	}
	if (forget->desc != NULL) {
		spdk_bdev_close(forget->desc);
	}
	spdk_dma_free(forget->buf);
	free(forget->cache);
	free(forget);
}

static void
forget_write_done(struct spdk_bdev_io *bdev_io, bool success, void *ctx)
{
	struct hhc_forget *forget = ctx;

	spdk_bdev_free_io(bdev_io);
	hhc_rs_forget_done(forget->cache, success, (struct hhc_glue_rpc *)forget->request);
	forget_free(forget);
}

static void
forget_read_done(struct spdk_bdev_io *bdev_io, bool success, void *ctx)
{
	struct hhc_forget *forget = ctx;
	int rc;

	spdk_bdev_free_io(bdev_io);
	if (!success) {
		spdk_jsonrpc_send_error_response_fmt(forget->request, -EIO, "cache: reading bdev '%s' failed",
						     forget->cache);
		forget_free(forget);
		return;
	}
	if (!hhc_rs_forget_check(forget->cache, forget->buf, HHC_FORGET_BYTES, forget->force,
				 (struct hhc_glue_rpc *)forget->request)) {
		forget_free(forget);
		return;
	}
	memset(forget->buf, 0, forget->len);
	rc = spdk_bdev_write(forget->desc, forget->channel, forget->buf, 0, forget->len, forget_write_done, forget);
	if (rc != 0) {
		hhc_rs_forget_done(forget->cache, false, (struct hhc_glue_rpc *)forget->request);
		forget_free(forget);
	}
}

static void
rpc_bdev_hhc_forget(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_forget req = {0};
	struct hhc_forget *forget;
	struct spdk_bdev *bdev;
	uint32_t block_size;
	int rc;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_forget_decoders,
			SPDK_COUNTOF(g_rpc_forget_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need cache (string), force (bool) optional");
		free(req.cache);
		return;
	}
	forget = calloc(1, sizeof(*forget));
	if (forget == NULL) {
		spdk_jsonrpc_send_error_response(request, -ENOMEM, spdk_strerror(ENOMEM));
		free(req.cache);
		return;
	}
	forget->request = request;
	forget->cache = req.cache;
	forget->force = req.force;
	bdev = spdk_bdev_get_by_name(forget->cache);
	if (bdev != NULL && bdev->module == &g_hhc_module) {
		spdk_jsonrpc_send_error_response_fmt(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						     "cache: '%s' is an HHC bdev, not a cache bdev", forget->cache);
		forget_free(forget);
		return;
	}
	rc = spdk_bdev_open_ext(forget->cache, true, forget_event_cb, NULL, &forget->desc);
	if (rc == -EPERM) {
		/* Claimed for writing by another module, or by an HHC bdev. */
		spdk_jsonrpc_send_error_response_fmt(request, -EBUSY,
						     "cache: bdev '%s' is in use (claimed): delete the HHC bdev over it "
						     "first (bdev_hhc_delete)", forget->cache);
		forget_free(forget);
		return;
	}
	if (rc != 0) {
		spdk_jsonrpc_send_error_response_fmt(request, rc, "cache: no bdev named '%s' to open (%s)",
						     forget->cache, spdk_strerror(-rc));
		forget_free(forget);
		return;
	}
	bdev = spdk_bdev_desc_get_bdev(forget->desc);
	/* Claimed: an HHC bdev (or anything else) uses it now. */
	rc = spdk_bdev_module_claim_bdev(bdev, forget->desc, &g_hhc_module);
	if (rc != 0) {
		spdk_jsonrpc_send_error_response_fmt(request, -EBUSY,
						     "cache: bdev '%s' is in use (claimed): delete the HHC bdev over it "
						     "first (bdev_hhc_delete)", forget->cache);
		forget_free(forget);
		return;
	}
	forget->claimed = true;
	block_size = spdk_bdev_get_block_size(bdev);
	forget->len = (HHC_FORGET_BYTES + block_size - 1) / block_size * block_size;
	forget->buf = spdk_dma_zmalloc(forget->len, spdk_bdev_get_buf_align(bdev), NULL);
	forget->channel = spdk_bdev_get_io_channel(forget->desc);
	if (forget->buf == NULL || forget->channel == NULL) {
		spdk_jsonrpc_send_error_response(request, -ENOMEM, spdk_strerror(ENOMEM));
		forget_free(forget);
		return;
	}
	if (forget->len > spdk_bdev_get_num_blocks(bdev) * block_size) {
		spdk_jsonrpc_send_error_response_fmt(request, -ENODEV, "cache: bdev '%s' holds no HHC cache (too small)",
						     forget->cache);
		forget_free(forget);
		return;
	}
	rc = spdk_bdev_read(forget->desc, forget->channel, forget->buf, 0, forget->len, forget_read_done, forget);
	if (rc != 0) {
		spdk_jsonrpc_send_error_response_fmt(request, rc, "cache: cannot read bdev '%s' (%s)", forget->cache,
						     spdk_strerror(-rc));
		forget_free(forget);
	}
}
SPDK_RPC_REGISTER("bdev_hhc_forget", rpc_bdev_hhc_forget, SPDK_RPC_RUNTIME)

static const struct spdk_json_object_decoder g_rpc_get_decoders[] = {
	{"name", offsetof(struct rpc_name, name), spdk_json_decode_string, true},
};

static void
rpc_bdev_hhc_get_bdevs(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_name req = {0};

	if (params != NULL && spdk_json_decode_object(params, g_rpc_get_decoders,
			SPDK_COUNTOF(g_rpc_get_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: optional name (string)");
		free(req.name);
		return;
	}
	hhc_rs_get_bdevs(req.name, (struct hhc_glue_rpc *)request);
	free(req.name);
}
SPDK_RPC_REGISTER("bdev_hhc_get_bdevs", rpc_bdev_hhc_get_bdevs, SPDK_RPC_RUNTIME)

/* The operator RPCs: {name} or {name, <arg>}, no other keys; Rust does the rest. */
struct rpc_control {
	char *name;
	char *arg;
};

static const struct spdk_json_object_decoder g_rpc_control_name_decoders[] = {
	{"name", offsetof(struct rpc_control, name), spdk_json_decode_string},
};

static const struct spdk_json_object_decoder g_rpc_control_policy_decoders[] = {
	{"name", offsetof(struct rpc_control, name), spdk_json_decode_string},
	{"policy", offsetof(struct rpc_control, arg), spdk_json_decode_string},
};

static const struct spdk_json_object_decoder g_rpc_control_log_decoders[] = {
	{"name", offsetof(struct rpc_control, name), spdk_json_decode_string},
	{"log", offsetof(struct rpc_control, arg), spdk_json_decode_string},
};

static void
rpc_control(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params,
	    enum hhc_glue_control op, const struct spdk_json_object_decoder *decoders, size_t count,
	    const char *usage)
{
	struct rpc_control req = {0};

	if (params == NULL || spdk_json_decode_object(params, decoders, count, &req)) {
		spdk_jsonrpc_send_error_response_fmt(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						     "invalid parameters: need %s; no other keys", usage);
	} else {
		hhc_rs_control(op, req.name, req.arg, (struct hhc_glue_rpc *)request);
	}
	free(req.name);
	free(req.arg);
}

#define RPC_CONTROL_NAME(method, op)								\
	static void										\
	rpc_##method(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)	\
	{											\
		rpc_control(request, params, op, g_rpc_control_name_decoders,			\
			    SPDK_COUNTOF(g_rpc_control_name_decoders), "name (string)");	\
	}											\
	SPDK_RPC_REGISTER(#method, rpc_##method, SPDK_RPC_RUNTIME)

RPC_CONTROL_NAME(bdev_hhc_get_stats, HHC_GLUE_CONTROL_GET_STATS)
RPC_CONTROL_NAME(bdev_hhc_reset_stats, HHC_GLUE_CONTROL_RESET_STATS)
RPC_CONTROL_NAME(bdev_hhc_flush_all, HHC_GLUE_CONTROL_FLUSH_ALL)

static void
rpc_bdev_hhc_set_policy(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	rpc_control(request, params, HHC_GLUE_CONTROL_SET_POLICY, g_rpc_control_policy_decoders,
		    SPDK_COUNTOF(g_rpc_control_policy_decoders), "name, policy (strings)");
}
SPDK_RPC_REGISTER("bdev_hhc_set_policy", rpc_bdev_hhc_set_policy, SPDK_RPC_RUNTIME)

/* bdev_hhc_set_options {name, and any of the options}: Rust checks the values. */
struct rpc_set_options {
	char *name;
	uint32_t dirty_threshold;
	uint32_t writeback_parallelism;
	uint32_t idle_after_ms;
	uint64_t seq_cutoff_threshold;
	char *seq_cutoff_policy;
};

static const struct spdk_json_object_decoder g_rpc_set_options_decoders[] = {
	{"name", offsetof(struct rpc_set_options, name), spdk_json_decode_string},
	{"dirty_threshold", offsetof(struct rpc_set_options, dirty_threshold), spdk_json_decode_uint32, true},
	{"writeback_parallelism", offsetof(struct rpc_set_options, writeback_parallelism), spdk_json_decode_uint32, true},
	{"idle_after_ms", offsetof(struct rpc_set_options, idle_after_ms), spdk_json_decode_uint32, true},
	{"seq_cutoff_threshold", offsetof(struct rpc_set_options, seq_cutoff_threshold), spdk_json_decode_uint64, true},
	{"seq_cutoff_policy", offsetof(struct rpc_set_options, seq_cutoff_policy), spdk_json_decode_string, true},
};

static void
rpc_bdev_hhc_set_options(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_set_options req = {
		.dirty_threshold = HHC_GLUE_UNSET,
		.writeback_parallelism = HHC_GLUE_UNSET,
		.idle_after_ms = HHC_GLUE_UNSET,
		.seq_cutoff_threshold = HHC_GLUE_UNSET64,
	};
	struct hhc_glue_options options;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_set_options_decoders,
			SPDK_COUNTOF(g_rpc_set_options_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name (string); optional dirty_threshold, "
						 "writeback_parallelism, idle_after_ms, seq_cutoff_threshold "
						 "(unsigned integers), seq_cutoff_policy (string); no other keys");
	} else {
		options.dirty_threshold = req.dirty_threshold;
		options.writeback_parallelism = req.writeback_parallelism;
		options.idle_after_ms = req.idle_after_ms;
		options.seq_cutoff_threshold = req.seq_cutoff_threshold;
		options.seq_cutoff_policy = req.seq_cutoff_policy;
		hhc_rs_set_options(req.name, &options, (struct hhc_glue_rpc *)request);
	}
	free(req.name);
	free(req.seq_cutoff_policy);
}
SPDK_RPC_REGISTER("bdev_hhc_set_options", rpc_bdev_hhc_set_options, SPDK_RPC_RUNTIME)

#define RPC_CONTROL_LOG(method, op)								\
	static void										\
	rpc_##method(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)	\
	{											\
		rpc_control(request, params, op, g_rpc_control_log_decoders,			\
			    SPDK_COUNTOF(g_rpc_control_log_decoders), "name, log (strings)");	\
	}											\
	SPDK_RPC_REGISTER(#method, rpc_##method, SPDK_RPC_RUNTIME)

RPC_CONTROL_LOG(bdev_hhc_attach_log, HHC_GLUE_CONTROL_ATTACH_LOG)
RPC_CONTROL_LOG(bdev_hhc_detach_log, HHC_GLUE_CONTROL_DETACH_LOG)

/* bdev_hhc_recover {name, mode, cache?}: after the cache bdev was lost. */
struct rpc_recover {
	char *name;
	char *mode;
	char *cache;
};

static const struct spdk_json_object_decoder g_rpc_recover_decoders[] = {
	{"name", offsetof(struct rpc_recover, name), spdk_json_decode_string},
	{"mode", offsetof(struct rpc_recover, mode), spdk_json_decode_string},
	{"cache", offsetof(struct rpc_recover, cache), spdk_json_decode_string, true},
};

static void
rpc_bdev_hhc_recover(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_recover req = {0};

	if (params == NULL || spdk_json_decode_object(params, g_rpc_recover_decoders,
			SPDK_COUNTOF(g_rpc_recover_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name, mode (strings); optional cache "
						 "(string); no other keys");
	} else {
		hhc_rs_recover(req.name, req.mode, req.cache, (struct hhc_glue_rpc *)request);
	}
	free(req.name);
	free(req.mode);
	free(req.cache);
}
SPDK_RPC_REGISTER("bdev_hhc_recover", rpc_bdev_hhc_recover, SPDK_RPC_RUNTIME)

int
hhc_rpc_linked(void)
{
	return 0;
}
