/*
 * Exporter-private bump arena (see arena.h): blocks of 64 KiB, a large one-off request gets a
 * block of its own so the current block keeps serving the small ones.
 */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

struct pp_arena_block {
	struct pp_arena_block *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

#define ARENA_BLOCK (64u * 1024)

void *pp_arena_alloc(struct pp_arena *a, size_t size)
{
	struct pp_arena_block *b = a->head;
	void *r;

	if (size > SIZE_MAX / 2) {
		a->failed = true;
		return NULL;
	}
	size = (size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
	if (!size)
		size = alignof(max_align_t);
	if (!b || b->cap - b->used < size) {
		size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;

		b = calloc(1, sizeof(*b) + cap);
		if (!b) {
			a->failed = true;
			return NULL;
		}
		b->cap = cap;
		if (a->head && size > ARENA_BLOCK / 4) {
			b->next = a->head->next;
			a->head->next = b;
		} else {
			b->next = a->head;
			a->head = b;
		}
	}
	r = b->data + b->used;
	b->used += size;
	return r;
}

static void *pb_alloc(void *ctx, size_t size)
{
	return pp_arena_alloc(ctx, size);
}

static void pb_free(void *ctx, void *p)
{
	(void)ctx;
	(void)p;
}

ProtobufCAllocator pp_arena_pb_allocator(struct pp_arena *a)
{
	ProtobufCAllocator alloc = {pb_alloc, pb_free, a};

	return alloc;
}

void pp_arena_fini(struct pp_arena *a)
{
	while (a->head) {
		struct pp_arena_block *next = a->head->next;

		free(a->head);
		a->head = next;
	}
}
