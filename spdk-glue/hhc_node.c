/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * The HHC bdev as the bdev layer sees it: its fn table, its io_device with
 * a channel per thread and that channel's completion poller, registration,
 * and the data path (submit, buffers, completion) into src/ffi.
 */

#include "hhc_glue_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spdk/bdev.h"
#include "spdk/thread.h"
#include "spdk/uuid.h"

struct hhc_glue_node {
	struct spdk_bdev bdev;
	void *rs_node;
};

struct hhc_glue_channel {
	void *rs_channel;
	/* This thread's own channels to the backing and cache bdevs (NULL when
	 * out of memory: every command then goes out on the owner's). */
	struct hhc_glue_lane *lane;
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
	/* The buffers go along from here, where bdev_io is in the CPU cache. */
	hhc_rs_node_submit(node->rs_node, channel->rs_channel, (struct hhc_glue_io *)bdev_io, kind,
			   bdev_io->u.bdev.offset_blocks, bdev_io->u.bdev.num_blocks,
			   bdev_io->u.bdev.iovs, bdev_io->u.bdev.iovcnt);
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
				   HHC_GLUE_IO_FLUSH, bdev_io->u.bdev.offset_blocks, bdev_io->u.bdev.num_blocks, NULL, 0);
		return;
	case SPDK_BDEV_IO_TYPE_RESET:
		/* The bdev layer has frozen every channel; Rust completes the
		 * reset once the I/O still in the engine is done. */
		hhc_rs_node_submit(node->rs_node, channel->rs_channel, (struct hhc_glue_io *)bdev_io,
				   HHC_GLUE_IO_RESET, 0, 0, NULL, 0);
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
	       io_type == SPDK_BDEV_IO_TYPE_FLUSH || io_type == SPDK_BDEV_IO_TYPE_RESET;
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

static void
channel_destroy_cb(void *io_device, void *ctx_buf)
{
	struct hhc_glue_channel *channel = ctx_buf;

	spdk_poller_unregister(&channel->poller);
	hhc_rs_channel_destroy(channel->rs_channel);
	if (channel->lane != NULL) {
		hhc_glue_lane_destroy(channel->lane);
	}
}

static int
channel_create_cb(void *io_device, void *ctx_buf)
{
	struct hhc_glue_node *node = io_device;
	struct hhc_glue_channel *channel = ctx_buf;

	channel->lane = hhc_glue_lane_create(NULL, HHC_GLUE_LANE_COMMANDS);
	channel->rs_channel = hhc_rs_channel_create(node->rs_node, channel->lane);
	if (channel->rs_channel == NULL) {
		if (channel->lane != NULL) {
			hhc_glue_lane_destroy(channel->lane);
		}
		return -ENOMEM;
	}
	if (channel->lane != NULL) {
		channel->lane->rs_channel = channel->rs_channel;
	}
	channel->poller = SPDK_POLLER_REGISTER(channel_poll, channel, 0);
	if (channel->poller == NULL) {
		channel_destroy_cb(io_device, ctx_buf);
		return -ENOMEM;
	}
	return 0;
}

static void
update_channel_fn(struct spdk_io_channel_iter *i)
{
	struct hhc_glue_channel *channel = spdk_io_channel_get_ctx(spdk_io_channel_iter_get_channel(i));

	/* 0: the channel answers later (hhc_glue_channels_answer). */
	if (hhc_rs_channel_update(channel->rs_channel, i) != 0) {
		spdk_for_each_channel_continue(i, 0);
	}
}

static void
channels_updated(struct spdk_io_channel_iter *i, int status)
{
	struct hhc_glue_node *node = spdk_io_channel_iter_get_io_device(i);

	hhc_rs_node_channels_updated(node->rs_node);
}

void
hhc_glue_node_update_channels(struct hhc_glue_node *node)
{
	spdk_for_each_channel(node, update_channel_fn, NULL, channels_updated);
}

void
hhc_glue_channels_answer(void *iter)
{
	spdk_for_each_channel_continue(iter, 0);
}

/* Namespace of the bdev UUIDs derived from cache instance ids. */
#define HHC_UUID_NAMESPACE "5c2f0d8e-6b1a-4f7e-9a43-2d8c1e7b9f60"

int
hhc_glue_node_register(const char *name, uint32_t block_size, uint64_t blocks_count,
		       uint32_t required_alignment_log2, uint32_t max_rw_blocks, uint64_t instance_id,
		       void *rs_node, struct hhc_glue_node **out)
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
	/* The engine takes requests of a bounded length (Config::request_blocks_max). */
	node->bdev.max_rw_size = max_rw_blocks;
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

int
hhc_node_linked(void)
{
	return 0;
}
