/*
 * Decoder of the shim's ring-buffer records (ABI: kmod-shim/include/pebsprof/record.h).
 * Checks length, type and version before touching any field, copies the fixed part out (the
 * buffer may be unaligned, e.g. fuzz input), and counts each rejection reason.
 */
#ifndef PP_RECORD_DECODE_H
#define PP_RECORD_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pebsprof/record.h>

struct pp_decode_stats {
	uint64_t samples;     /* valid sample records */
	uint64_t tasks;	      /* valid task records */
	uint64_t too_short;   /* shorter than a header, or than its type's fixed part */
	uint64_t bad_size;    /* header size disagrees with the bytes received */
	uint64_t bad_type;    /* unknown record type */
	uint64_t bad_version; /* written by an incompatible shim */
	uint64_t bad_stack;   /* stack counts beyond the record or the maximum depth */
	uint64_t bad_raw; /* a stack copy (PP_SF_USTACK_RAW) longer than the record or its max */
};

enum pp_decoded_kind {
	PP_DECODED_SAMPLE = PP_REC_SAMPLE,
	PP_DECODED_TASK = PP_REC_TASK,
};

struct pp_decoded {
	enum pp_decoded_kind kind;
	const unsigned char *stack_bytes; /* borrowed from the input buffer */
	/* PP_SF_USTACK_RAW: the registers and the copy of the user stack (bytes borrowed) */
	struct pp_raw_ustack raw;
	const unsigned char *raw_bytes; /* raw.len bytes from raw.sp; NULL without a copy */
	/* Last: pp_sample ends in a flexible array (the frames stay in the input buffer). */
	union {
		struct pp_sample sample; /* fixed part; frames via pp_decoded_frame() */
		struct pp_task_event task;
	};
};

/*
 * Decodes one record of len bytes. Returns 0 and fills *out, or -EPROTO (malformed; the
 * reason is counted in *stats) or -EOPNOTSUPP (unknown type or version, counted).
 */
int pp_record_decode(const void *buf, size_t len, struct pp_decoded *out,
		     struct pp_decode_stats *stats);

/*
 * Frame i of a decoded sample: kernel frames first (0 .. nr_kstack), then user frames.
 * Inline: the pipeline reads every frame of every sample.
 */
static inline uint64_t pp_decoded_frame(const struct pp_decoded *d, uint32_t i)
{
	uint64_t v;

	memcpy(&v, d->stack_bytes + (size_t)i * sizeof(v), sizeof(v));
	return v;
}

#endif /* PP_RECORD_DECODE_H */
