/*
 * Exporter-private bump arena: the OTLP encoder builds every message of one request in one,
 * and the 413 splitter has protobuf-c unpack each half into one, so a whole message tree is
 * freed at once instead of node by node.
 */
#ifndef PP_EXPORTER_ARENA_H
#define PP_EXPORTER_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

struct pp_arena_block;

struct pp_arena {
	struct pp_arena_block *head;
	bool failed; /* an allocation failed: lets a failed unpack mean -ENOMEM, not bad bytes */
};

/* Returns zeroed memory aligned for any type, or NULL (and sets a->failed). */
void *pp_arena_alloc(struct pp_arena *a, size_t size);
/* A protobuf-c allocator that unpacks into a (its frees wait for pp_arena_fini). */
ProtobufCAllocator pp_arena_pb_allocator(struct pp_arena *a);
/* Frees every block; the arena is empty and usable again. */
void pp_arena_fini(struct pp_arena *a);

#endif
