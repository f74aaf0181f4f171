/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * C shim of the HHC bdev module: registers module "hhc", the bdev fn table,
 * the io_device with its per-channel context and pollers, the JSON-RPC
 * methods and their decoders, and wraps the SPDK calls the Rust side needs
 * (src/ffi/) behind hhc_glue.h. No caching policy lives here; every decision
 * is made in Rust. Only SPDK's public headers are used.
 */

#include "hhc_glue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spdk/bdev.h"
#include "spdk/bdev_module.h"
#include "spdk/env.h"
#include "spdk/json.h"
#include "spdk/jsonrpc.h"
#include "spdk/log.h"
#include "spdk/rpc.h"
#include "spdk/string.h"
#include "spdk/thread.h"
#include "spdk/util.h"

/* Most I/Os carry one or two iovecs; more than this take a heap array. */
#define HHC_INLINE_IOVS 8

static int hhc_module_init(void);
static void hhc_module_fini(void);

static void hhc_examine_config(struct spdk_bdev *bdev);
static void hhc_examine_disk(struct spdk_bdev *bdev);

static struct spdk_bdev_module g_hhc_module = {
	.name = "hhc",
	.module_init = hhc_module_init,
	.module_fini = hhc_module_fini,
	.examine_config = hhc_examine_config,
	.examine_disk = hhc_examine_disk,
};

SPDK_BDEV_MODULE_REGISTER(hhc, &g_hhc_module)
SPDK_LOG_REGISTER_COMPONENT(hhc)

/* ------------------------------------------------------------------ */
/* examine: an HHC cache bdev arriving assembles its HHC bdev          */
/* ------------------------------------------------------------------ */

/* Bytes of unit 0 handed to Rust: the cache superblock. */
#define HHC_EXAMINE_BYTES 4096

struct hhc_examine {
	struct spdk_bdev_desc *desc;
	struct spdk_io_channel *channel;
	void *buf;
	uint64_t len;
	char *name;
};

static void
hhc_examine_config(struct spdk_bdev *bdev)
{
	hhc_rs_examine_config(spdk_bdev_get_name(bdev));
	spdk_bdev_module_examine_done(&g_hhc_module);
}

static void
examine_event_cb(enum spdk_bdev_event_type type, struct spdk_bdev *bdev, void *ctx)
{
	/* The read in flight completes (with an error) if the bdev goes. */
}

static void
examine_finish(struct hhc_examine *examine, bool read_ok)
{
	if (examine->channel != NULL) {
		spdk_put_io_channel(examine->channel);
	}
	if (examine->desc != NULL) {
		spdk_bdev_close(examine->desc);
	}
	/* After the close: assembling claims this bdev. */
	if (read_ok) {
		hhc_rs_examine_disk(examine->name, examine->buf, HHC_EXAMINE_BYTES);
	}
	spdk_dma_free(examine->buf);
	free(examine->name);
	free(examine);
	spdk_bdev_module_examine_done(&g_hhc_module);
}

static void
examine_read_done(struct spdk_bdev_io *bdev_io, bool success, void *ctx)
{
	spdk_bdev_free_io(bdev_io);
	examine_finish(ctx, success);
}

static void
hhc_examine_disk(struct spdk_bdev *bdev)
{
	uint32_t block_size = spdk_bdev_get_block_size(bdev);
	struct hhc_examine *examine;
	int rc;

	examine = calloc(1, sizeof(*examine));
	if (examine == NULL) {
		spdk_bdev_module_examine_done(&g_hhc_module);
		return;
	}
	/* Whole blocks covering the superblock unit. */
	examine->len = (HHC_EXAMINE_BYTES + block_size - 1) / block_size * block_size;
	examine->name = strdup(spdk_bdev_get_name(bdev));
	examine->buf = spdk_dma_zmalloc(examine->len, spdk_bdev_get_buf_align(bdev), NULL);
	/* Our own bdevs and bdevs too small for a cache are never HHC caches. */
	if (examine->name == NULL || examine->buf == NULL || bdev->module == &g_hhc_module ||
	    examine->len > spdk_bdev_get_num_blocks(bdev) * block_size) {
		examine_finish(examine, false);
		return;
	}
	rc = spdk_bdev_open_ext(examine->name, false, examine_event_cb, NULL, &examine->desc);
	if (rc == 0) {
		examine->channel = spdk_bdev_get_io_channel(examine->desc);
		rc = examine->channel == NULL ? -ENOMEM : 0;
	}
	if (rc == 0) {
		rc = spdk_bdev_read(examine->desc, examine->channel, examine->buf, 0, examine->len,
				    examine_read_done, examine);
	}
	if (rc != 0) {
		examine_finish(examine, false);
	}
}

/* ------------------------------------------------------------------ */
/* base bdevs                                                          */
/* ------------------------------------------------------------------ */

struct hhc_dev_io {
	struct hhc_glue_base *base;
	enum hhc_glue_io_kind kind;
	uint64_t offset_bytes;
	uint64_t len_bytes;
	uint64_t tag;
	int iovs_count;
	struct iovec *iovs;
	struct iovec inline_iovs[HHC_INLINE_IOVS];
	struct spdk_bdev_io_wait_entry wait;
	struct hhc_dev_io *next_free;
};

struct hhc_glue_base {
	struct spdk_bdev_desc *desc;
	struct spdk_bdev *bdev;
	struct spdk_io_channel *channel;
	void *rs_base;
	/* I/Os started and not yet completed (including -ENOMEM waiters). */
	uint64_t outstanding;
	bool closing;
	/* Recycled per-I/O contexts: the pool grows to the peak queue depth
	 * once, after which the data path allocates nothing. */
	struct hhc_dev_io *free_ios;
};

static void base_finish_close(struct hhc_glue_base *base);

static void
base_event_cb(enum spdk_bdev_event_type type, struct spdk_bdev *bdev, void *event_ctx)
{
	struct hhc_glue_base *base = event_ctx;

	if (type != SPDK_BDEV_EVENT_REMOVE) {
		SPDK_NOTICELOG("hhc: ignoring event %d on bdev %s\n", type, spdk_bdev_get_name(bdev));
		return;
	}
	if (!base->closing) {
		hhc_rs_base_removed(base->rs_base);
	}
}

bool
hhc_glue_bdev_exists(const char *name)
{
	return spdk_bdev_get_by_name(name) != NULL;
}

int
hhc_glue_base_open(const char *name, void *rs_base, struct hhc_glue_base **out)
{
	struct hhc_glue_base *base = calloc(1, sizeof(*base));
	int rc;

	if (base == NULL) {
		return -ENOMEM;
	}
	base->rs_base = rs_base;
	rc = spdk_bdev_open_ext(name, true, base_event_cb, base, &base->desc);
	if (rc != 0) {
		free(base);
		return rc;
	}
	base->bdev = spdk_bdev_desc_get_bdev(base->desc);
	rc = spdk_bdev_module_claim_bdev(base->bdev, base->desc, &g_hhc_module);
	if (rc != 0) {
		spdk_bdev_close(base->desc);
		free(base);
		return rc;
	}
	*out = base;
	return 0;
}

void
hhc_glue_base_get_info(const struct hhc_glue_base *base, struct hhc_glue_base_info *info)
{
	info->block_size = spdk_bdev_get_block_size(base->bdev);
	info->blocks_count = spdk_bdev_get_num_blocks(base->bdev);
	info->required_alignment_log2 = spdk_u32log2(spdk_bdev_get_buf_align(base->bdev));
	info->supports_flush = spdk_bdev_io_type_supported(base->bdev, SPDK_BDEV_IO_TYPE_FLUSH);
	info->volatile_write_cache = spdk_bdev_has_write_cache(base->bdev);
}

int
hhc_glue_base_get_channel(struct hhc_glue_base *base)
{
	base->channel = spdk_bdev_get_io_channel(base->desc);
	return base->channel == NULL ? -ENOMEM : 0;
}

static struct hhc_dev_io *
dev_io_get(struct hhc_glue_base *base)
{
	struct hhc_dev_io *io = base->free_ios;

	if (io != NULL) {
		base->free_ios = io->next_free;
		return io;
	}
	io = calloc(1, sizeof(*io));
	if (io != NULL) {
		io->base = base;
	}
	return io;
}

static void
dev_io_put(struct hhc_dev_io *io)
{
	struct hhc_glue_base *base = io->base;

	if (io->iovs != io->inline_iovs) {
		free(io->iovs);
	}
	io->iovs = NULL;
	io->next_free = base->free_ios;
	base->free_ios = io;
}

/* Hands a finished I/O to Rust unless the base is already closed. */
static void
dev_io_finish(struct hhc_dev_io *io, int status)
{
	struct hhc_glue_base *base = io->base;
	uint64_t tag = io->tag;

	dev_io_put(io);
	base->outstanding--;
	if (!base->closing) {
		hhc_rs_base_io_done(base->rs_base, tag, status);
	} else if (base->outstanding == 0) {
		base_finish_close(base);
	}
}

static void
dev_io_complete_cb(struct spdk_bdev_io *bdev_io, bool success, void *cb_arg)
{
	spdk_bdev_free_io(bdev_io);
	dev_io_finish(cb_arg, success ? 0 : -EIO);
}

static int
dev_io_start(struct hhc_dev_io *io)
{
	struct hhc_glue_base *base = io->base;

	switch (io->kind) {
	case HHC_GLUE_IO_READ:
		return spdk_bdev_readv(base->desc, base->channel, io->iovs, io->iovs_count, io->offset_bytes,
				       io->len_bytes, dev_io_complete_cb, io);
	case HHC_GLUE_IO_WRITE:
		return spdk_bdev_writev(base->desc, base->channel, io->iovs, io->iovs_count, io->offset_bytes,
					io->len_bytes, dev_io_complete_cb, io);
	case HHC_GLUE_IO_FLUSH:
		return spdk_bdev_flush(base->desc, base->channel, 0,
				       spdk_bdev_get_num_blocks(base->bdev) * spdk_bdev_get_block_size(base->bdev),
				       dev_io_complete_cb, io);
	}
	return -EINVAL;
}

static void
dev_io_fail_msg(void *arg)
{
	dev_io_finish(arg, -EIO);
}

static void dev_io_retry(void *arg);

static int
dev_io_wait(struct hhc_dev_io *io)
{
	io->wait.bdev = io->base->bdev;
	io->wait.cb_fn = dev_io_retry;
	io->wait.cb_arg = io;
	return spdk_bdev_queue_io_wait(io->base->bdev, io->base->channel, &io->wait);
}

/* Runs from the bdev layer once an spdk_bdev_io is free again. A failure
 * here is reported through a message, so Rust is never re-entered from a
 * call it made itself. */
static void
dev_io_retry(void *arg)
{
	struct hhc_dev_io *io = arg;
	int rc = dev_io_start(io);

	if (rc == -ENOMEM) {
		rc = dev_io_wait(io);
	}
	if (rc != 0) {
		SPDK_ERRLOG("hhc: resubmitting I/O to %s failed: %s\n", spdk_bdev_get_name(io->base->bdev),
			    spdk_strerror(-rc));
		spdk_thread_send_msg(spdk_get_thread(), dev_io_fail_msg, io);
	}
}

int
hhc_glue_base_submit(struct hhc_glue_base *base, enum hhc_glue_io_kind kind, uint64_t offset_bytes,
		     uint64_t len_bytes, const struct iovec *iovs, int iovs_count, uint64_t tag)
{
	struct hhc_dev_io *io;
	int rc;

	if (base->closing || base->channel == NULL || iovs_count < 0) {
		return -ENODEV;
	}
	io = dev_io_get(base);
	if (io == NULL) {
		return -ENOMEM;
	}
	io->kind = kind;
	io->offset_bytes = offset_bytes;
	io->len_bytes = len_bytes;
	io->tag = tag;
	io->iovs_count = iovs_count;
	io->iovs = iovs_count <= HHC_INLINE_IOVS ? io->inline_iovs : calloc(iovs_count, sizeof(*iovs));
	if (io->iovs == NULL) {
		io->iovs = io->inline_iovs;
		dev_io_put(io);
		return -ENOMEM;
	}
	if (iovs_count > 0) {
		memcpy(io->iovs, iovs, iovs_count * sizeof(*iovs));
	}
	rc = dev_io_start(io);
	if (rc == -ENOMEM) {
		rc = dev_io_wait(io);
	}
	if (rc != 0) {
		dev_io_put(io);
		return rc;
	}
	base->outstanding++;
	return 0;
}

static void
base_finish_close(struct hhc_glue_base *base)
{
	struct hhc_dev_io *io;

	if (base->channel != NULL) {
		spdk_put_io_channel(base->channel);
	}
	spdk_bdev_close(base->desc);
	while ((io = base->free_ios) != NULL) {
		base->free_ios = io->next_free;
		free(io);
	}
	free(base);
}

void
hhc_glue_base_close(struct hhc_glue_base *base)
{
	base->closing = true;
	spdk_bdev_module_release_bdev(base->bdev);
	if (base->outstanding == 0) {
		base_finish_close(base);
	}
}

/* ------------------------------------------------------------------ */
/* the HHC bdev                                                        */
/* ------------------------------------------------------------------ */

struct hhc_glue_node {
	struct spdk_bdev bdev;
	void *rs_node;
};

struct hhc_glue_channel {
	void *rs_channel;
	struct spdk_poller *poller;
};

static int
node_destruct(void *ctx)
{
	struct hhc_glue_node *node = ctx;

	return hhc_rs_node_destruct(node->rs_node);
}

static void
node_submit_with_buf(struct spdk_io_channel *ch, struct spdk_bdev_io *bdev_io, bool success)
{
	struct hhc_glue_node *node = bdev_io->bdev->ctxt;
	struct hhc_glue_channel *channel = spdk_io_channel_get_ctx(ch);
	enum hhc_glue_io_kind kind = bdev_io->type == SPDK_BDEV_IO_TYPE_READ ? HHC_GLUE_IO_READ : HHC_GLUE_IO_WRITE;

	if (!success) {
		spdk_bdev_io_complete(bdev_io, SPDK_BDEV_IO_STATUS_NOMEM);
		return;
	}
	hhc_rs_node_submit(node->rs_node, channel->rs_channel, (struct hhc_glue_io *)bdev_io, kind,
			   bdev_io->u.bdev.offset_blocks, bdev_io->u.bdev.num_blocks);
}

static void
node_submit_request(struct spdk_io_channel *ch, struct spdk_bdev_io *bdev_io)
{
	struct hhc_glue_node *node = bdev_io->bdev->ctxt;
	struct hhc_glue_channel *channel = spdk_io_channel_get_ctx(ch);

	switch (bdev_io->type) {
	case SPDK_BDEV_IO_TYPE_READ:
	case SPDK_BDEV_IO_TYPE_WRITE:
		/* Gives reads a buffer and bounces writes whose buffers miss the
		 * alignment the base bdevs need. */
		spdk_bdev_io_get_buf(bdev_io, node_submit_with_buf,
				     bdev_io->u.bdev.num_blocks * bdev_io->bdev->blocklen);
		return;
	case SPDK_BDEV_IO_TYPE_FLUSH:
		hhc_rs_node_submit(node->rs_node, channel->rs_channel, (struct hhc_glue_io *)bdev_io,
				   HHC_GLUE_IO_FLUSH, bdev_io->u.bdev.offset_blocks, bdev_io->u.bdev.num_blocks);
		return;
	default:
		spdk_bdev_io_complete(bdev_io, SPDK_BDEV_IO_STATUS_FAILED);
		return;
	}
}

static bool
node_io_type_supported(void *ctx, enum spdk_bdev_io_type io_type)
{
	return io_type == SPDK_BDEV_IO_TYPE_READ || io_type == SPDK_BDEV_IO_TYPE_WRITE ||
	       io_type == SPDK_BDEV_IO_TYPE_FLUSH;
}

static struct spdk_io_channel *
node_get_io_channel(void *ctx)
{
	return spdk_get_io_channel(ctx);
}

static int
node_dump_info_json(void *ctx, struct spdk_json_write_ctx *w)
{
	struct hhc_glue_node *node = ctx;

	hhc_rs_node_dump_info(node->rs_node, (struct hhc_glue_json *)w);
	return 0;
}

static void
node_write_config_json(struct spdk_bdev *bdev, struct spdk_json_write_ctx *w)
{
	struct hhc_glue_node *node = bdev->ctxt;

	hhc_rs_node_write_config(node->rs_node, (struct hhc_glue_json *)w);
}

static const struct spdk_bdev_fn_table g_hhc_fn_table = {
	.destruct = node_destruct,
	.submit_request = node_submit_request,
	.io_type_supported = node_io_type_supported,
	.get_io_channel = node_get_io_channel,
	.dump_info_json = node_dump_info_json,
	.write_config_json = node_write_config_json,
};

static int
channel_poll(void *arg)
{
	struct hhc_glue_channel *channel = arg;

	return hhc_rs_channel_poll(channel->rs_channel) > 0 ? SPDK_POLLER_BUSY : SPDK_POLLER_IDLE;
}

static int
channel_create_cb(void *io_device, void *ctx_buf)
{
	struct hhc_glue_node *node = io_device;
	struct hhc_glue_channel *channel = ctx_buf;

	channel->rs_channel = hhc_rs_channel_create(node->rs_node);
	if (channel->rs_channel == NULL) {
		return -ENOMEM;
	}
	channel->poller = SPDK_POLLER_REGISTER(channel_poll, channel, 0);
	if (channel->poller == NULL) {
		hhc_rs_channel_destroy(channel->rs_channel);
		return -ENOMEM;
	}
	return 0;
}

static void
channel_destroy_cb(void *io_device, void *ctx_buf)
{
	struct hhc_glue_channel *channel = ctx_buf;

	spdk_poller_unregister(&channel->poller);
	hhc_rs_channel_destroy(channel->rs_channel);
}

/* Namespace of the bdev UUIDs derived from cache instance ids. */
#define HHC_UUID_NAMESPACE "5c2f0d8e-6b1a-4f7e-9a43-2d8c1e7b9f60"

int
hhc_glue_node_register(const char *name, uint32_t block_size, uint64_t blocks_count,
		       uint32_t required_alignment_log2, uint64_t instance_id, void *rs_node,
		       struct hhc_glue_node **out)
{
	struct hhc_glue_node *node = calloc(1, sizeof(*node));
	struct spdk_uuid namespace_uuid;
	char instance[17];
	int rc;

	if (node == NULL) {
		return -ENOMEM;
	}
	node->bdev.name = strdup(name);
	if (node->bdev.name == NULL) {
		free(node);
		return -ENOMEM;
	}
	node->rs_node = rs_node;
	node->bdev.product_name = "HHC hybrid host cache";
	node->bdev.blocklen = block_size;
	node->bdev.blockcnt = blocks_count;
	node->bdev.required_alignment = required_alignment_log2;
	/* A FLUSH is meaningful: it is the barrier the HDD log serves. */
	node->bdev.write_cache = 1;
	/* Hosts (NVMe-oF NGUID, vhost serials) see the same disk after a restart. */
	snprintf(instance, sizeof(instance), "%016" PRIx64, instance_id);
	rc = spdk_uuid_parse(&namespace_uuid, HHC_UUID_NAMESPACE);
	if (rc == 0) {
		rc = spdk_uuid_generate_sha1(&node->bdev.uuid, &namespace_uuid, instance, strlen(instance));
	}
	if (rc != 0) {
		free(node->bdev.name);
		free(node);
		return rc;
	}
	node->bdev.ctxt = node;
	node->bdev.fn_table = &g_hhc_fn_table;
	node->bdev.module = &g_hhc_module;
	spdk_io_device_register(node, channel_create_cb, channel_destroy_cb, sizeof(struct hhc_glue_channel),
				name);
	rc = spdk_bdev_register(&node->bdev);
	if (rc != 0) {
		spdk_io_device_unregister(node, NULL);
		free(node->bdev.name);
		free(node);
		return rc;
	}
	*out = node;
	return 0;
}

void
hhc_glue_node_unregister(struct hhc_glue_node *node)
{
	spdk_bdev_unregister(&node->bdev, NULL, NULL);
}

static void
node_free_cb(void *io_device)
{
	struct hhc_glue_node *node = io_device;

	free(node->bdev.name);
	free(node);
}

void
hhc_glue_node_destruct_done(struct hhc_glue_node *node)
{
	spdk_bdev_destruct_done(&node->bdev, 0);
	spdk_io_device_unregister(node, node_free_cb);
}

const struct iovec *
hhc_glue_io_iovs(struct hhc_glue_io *io, int *iovs_count)
{
	struct spdk_bdev_io *bdev_io = (struct spdk_bdev_io *)io;

	*iovs_count = bdev_io->u.bdev.iovcnt;
	return bdev_io->u.bdev.iovs;
}

void
hhc_glue_io_complete(struct hhc_glue_io *io, int status)
{
	struct spdk_bdev_io *bdev_io = (struct spdk_bdev_io *)io;

	if (status == 0) {
		spdk_bdev_io_complete(bdev_io, SPDK_BDEV_IO_STATUS_SUCCESS);
	} else if (status == -ENOMEM) {
		spdk_bdev_io_complete(bdev_io, SPDK_BDEV_IO_STATUS_NOMEM);
	} else {
		spdk_bdev_io_complete_aio_status(bdev_io, status);
	}
}

/* ------------------------------------------------------------------ */
/* threads, time, memory, logging, JSON                                */
/* ------------------------------------------------------------------ */

struct hhc_glue_poller *
hhc_glue_poller_start(int (*poll)(void *arg), void *arg, uint64_t period_us)
{
	return (struct hhc_glue_poller *)spdk_poller_register(poll, arg, period_us);
}

void
hhc_glue_poller_stop(struct hhc_glue_poller *poller)
{
	struct spdk_poller *spdk_poller = (struct spdk_poller *)poller;

	spdk_poller_unregister(&spdk_poller);
}

const void *
hhc_glue_thread_current(void)
{
	return spdk_get_thread();
}

int
hhc_glue_thread_send(const void *thread, void (*fn)(void *arg), void *arg)
{
	return spdk_thread_send_msg(thread, fn, arg);
}

uint64_t
hhc_glue_now_ns(void)
{
	uint64_t ticks = spdk_get_ticks();
	uint64_t hz = spdk_get_ticks_hz();

	return ticks / hz * 1000000000ULL + ticks % hz * 1000000000ULL / hz;
}

void *
hhc_glue_dma_zmalloc(size_t len_bytes, size_t align_bytes)
{
	return spdk_dma_zmalloc(len_bytes, align_bytes, NULL);
}

void
hhc_glue_dma_free(void *buffer)
{
	spdk_dma_free(buffer);
}

void
hhc_glue_log(enum hhc_glue_log_level level, const char *message)
{
	switch (level) {
	case HHC_GLUE_LOG_ERROR:
		SPDK_ERRLOG("hhc: %s\n", message);
		break;
	case HHC_GLUE_LOG_WARN:
		SPDK_WARNLOG("hhc: %s\n", message);
		break;
	case HHC_GLUE_LOG_NOTICE:
	case HHC_GLUE_LOG_INFO:
		SPDK_NOTICELOG("hhc: %s\n", message);
		break;
	default:
		SPDK_DEBUGLOG(hhc, "%s\n", message);
		break;
	}
}

void
hhc_glue_json_write_raw(struct hhc_glue_json *json, const char *name, const char *text, size_t len)
{
	struct spdk_json_write_ctx *w = (struct spdk_json_write_ctx *)json;

	if (name != NULL) {
		spdk_json_write_name(w, name);
	}
	spdk_json_write_val_raw(w, text, len);
}

int
hhc_glue_anchor(void)
{
	return 0;
}

/* ------------------------------------------------------------------ */
/* module and JSON-RPC                                                 */
/* ------------------------------------------------------------------ */

static int
hhc_module_init(void)
{
	return 0;
}

static void
hhc_module_fini(void)
{
	hhc_rs_module_fini();
}

void
hhc_glue_rpc_reply_raw(struct hhc_glue_rpc *rpc, const char *text, size_t len)
{
	struct spdk_jsonrpc_request *request = (struct spdk_jsonrpc_request *)rpc;
	struct spdk_json_write_ctx *w = spdk_jsonrpc_begin_result(request);

	spdk_json_write_val_raw(w, text, len);
	spdk_jsonrpc_end_result(request, w);
}

void
hhc_glue_rpc_reply_error(struct hhc_glue_rpc *rpc, int code, const char *message)
{
	spdk_jsonrpc_send_error_response((struct spdk_jsonrpc_request *)rpc, code, message);
}

struct rpc_create {
	char *name;
	char *backing;
	char *cache;
	char *logs[HHC_GLUE_MAX_LOGS];
	size_t logs_count;
	char *policy;
	uint32_t block_size;
	uint32_t segment_size;
	uint32_t buffer_count;
	uint32_t dirty_threshold;
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
	{"cache", offsetof(struct rpc_create, cache), spdk_json_decode_string},
	{"logs", offsetof(struct rpc_create, logs), decode_logs, true},
	{"policy", offsetof(struct rpc_create, policy), spdk_json_decode_string, true},
	{"block_size", offsetof(struct rpc_create, block_size), spdk_json_decode_uint32, true},
	{"segment_size", offsetof(struct rpc_create, segment_size), spdk_json_decode_uint32, true},
	{"buffer_count", offsetof(struct rpc_create, buffer_count), spdk_json_decode_uint32, true},
	{"dirty_threshold", offsetof(struct rpc_create, dirty_threshold), spdk_json_decode_uint32, true},
};

static void
rpc_create_free(struct rpc_create *req)
{
	size_t i;

	free(req->name);
	free(req->backing);
	free(req->cache);
	free(req->policy);
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
		.dirty_threshold = HHC_GLUE_UNSET,
	};
	struct hhc_glue_create_params p = {0};
	size_t i;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_create_decoders,
			SPDK_COUNTOF(g_rpc_create_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name, backing, cache (strings); optional logs "
						 "(array of at most 8 bdev names), policy (string), block_size, "
						 "segment_size, buffer_count, dirty_threshold (unsigned integers); "
						 "no other keys");
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
	p.block_size = req.block_size;
	p.segment_size = req.segment_size;
	p.buffer_count = req.buffer_count;
	p.dirty_threshold = req.dirty_threshold;
	hhc_rs_create(&p, (struct hhc_glue_rpc *)request);
	rpc_create_free(&req);
}
SPDK_RPC_REGISTER("bdev_hhc_create", rpc_bdev_hhc_create, SPDK_RPC_RUNTIME)

struct rpc_name {
	char *name;
};

static const struct spdk_json_object_decoder g_rpc_name_decoders[] = {
	{"name", offsetof(struct rpc_name, name), spdk_json_decode_string},
};

static void
rpc_delete_cb(void *cb_arg, int bdeverrno)
{
	struct spdk_jsonrpc_request *request = cb_arg;

	if (bdeverrno == 0) {
		spdk_jsonrpc_send_bool_response(request, true);
	} else {
		spdk_jsonrpc_send_error_response(request, bdeverrno, spdk_strerror(-bdeverrno));
	}
}

static void
rpc_bdev_hhc_delete(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_name req = {0};
	int rc;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_name_decoders,
			SPDK_COUNTOF(g_rpc_name_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name (string)");
		free(req.name);
		return;
	}
	rc = spdk_bdev_unregister_by_name(req.name, &g_hhc_module, rpc_delete_cb, request);
	if (rc != 0) {
		spdk_jsonrpc_send_error_response_fmt(request, rc, "no HHC bdev named '%s': %s", req.name,
						     spdk_strerror(-rc));
	}
	free(req.name);
}
SPDK_RPC_REGISTER("bdev_hhc_delete", rpc_bdev_hhc_delete, SPDK_RPC_RUNTIME)

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
