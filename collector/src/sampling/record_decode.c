/* Validating decoder of shim records; see record_decode.h. */
#include "record_decode.h"

#include <errno.h>
#include <string.h>

int pp_record_decode(const void *buf, size_t len, struct pp_decoded *out,
		     struct pp_decode_stats *stats)
{
	struct pp_rec_hdr hdr;
	size_t frames, tail;

	if (!buf || len < sizeof(hdr)) {
		stats->too_short++;
		return -EPROTO;
	}
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.size < sizeof(hdr) || hdr.size > len) {
		stats->bad_size++;
		return -EPROTO;
	}
	if (hdr.version != PP_RECORD_ABI_VERSION) {
		stats->bad_version++;
		return -EOPNOTSUPP;
	}
	switch (hdr.type) {
	case PP_REC_SAMPLE:
		if (hdr.size < sizeof(out->sample)) {
			stats->too_short++;
			return -EPROTO;
		}
		memcpy(&out->sample, buf, sizeof(out->sample));
		frames = (size_t)out->sample.nr_kstack + out->sample.nr_ustack;
		tail = sizeof(out->sample) + frames * sizeof(uint64_t);
		if (out->sample.nr_kstack > PP_MAX_STACK_DEPTH ||
		    out->sample.nr_ustack > PP_MAX_STACK_DEPTH ||
		    (out->sample.flags & PP_SF_USTACK_RAW ? tail > hdr.size : tail != hdr.size)) {
			stats->bad_stack++;
			return -EPROTO;
		}
		out->raw_bytes = NULL;
		memset(&out->raw, 0, sizeof(out->raw));
		if (out->sample.flags & PP_SF_USTACK_RAW) {
			if (hdr.size - tail < sizeof(out->raw)) {
				stats->bad_raw++;
				return -EPROTO;
			}
			memcpy(&out->raw, (const unsigned char *)buf + tail, sizeof(out->raw));
			if (out->raw.len == 0 || out->raw.len > PP_RAW_USTACK_MAX ||
			    out->raw.len != hdr.size - tail - sizeof(out->raw)) {
				stats->bad_raw++;
				return -EPROTO;
			}
			out->raw_bytes = (const unsigned char *)buf + tail + sizeof(out->raw);
		}
		out->sample.comm[sizeof(out->sample.comm) - 1] = '\0';
		out->kind = PP_DECODED_SAMPLE;
		out->stack_bytes = (const unsigned char *)buf + sizeof(out->sample);
		stats->samples++;
		return 0;
	case PP_REC_TASK:
		if (hdr.size != sizeof(out->task)) {
			stats->too_short++;
			return -EPROTO;
		}
		memcpy(&out->task, buf, sizeof(out->task));
		if (out->task.kind != PP_TASK_EXEC && out->task.kind != PP_TASK_EXIT) {
			stats->bad_type++;
			return -EOPNOTSUPP;
		}
		out->kind = PP_DECODED_TASK;
		out->stack_bytes = NULL;
		out->raw_bytes = NULL;
		stats->tasks++;
		return 0;
	default:
		stats->bad_type++;
		return -EOPNOTSUPP;
	}
}
