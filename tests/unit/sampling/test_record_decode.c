/* The record decoder on valid, truncated, inconsistent and garbage records. */
#include <errno.h>
#include <stddef.h>

#include "check.h"
#include "sampling/record_decode.h"

static size_t make_sample(unsigned char *buf, uint16_t nk, uint16_t nu)
{
	struct pp_sample s;
	size_t size = sizeof(s) + ((size_t)nk + nu) * sizeof(uint64_t);

	memset(&s, 0, sizeof(s));
	s.hdr.type = PP_REC_SAMPLE;
	s.hdr.version = PP_RECORD_ABI_VERSION;
	s.hdr.size = (uint32_t)size;
	s.tgid = 4242;
	s.tid = 4243;
	s.ip = 0x401136;
	s.period = 1000000;
	s.addr = 0x7ffd0000beefull;
	s.data_src = 0x1e05080021ull;
	s.cpu = 1;
	s.nr_kstack = nk;
	s.nr_ustack = nu;
	memcpy(s.comm, "worker-thread-1x", 16); /* not NUL-terminated on purpose */
	memcpy(buf, &s, sizeof(s));
	for (uint16_t i = 0; i < nk + nu; i++) {
		uint64_t f = (i < nk ? 0xffffffff81000000ull : 0x400000ull) + i;

		memcpy(buf + sizeof(s) + i * sizeof(f), &f, sizeof(f));
	}
	return size;
}

TEST(valid_sample_with_stacks)
{
	unsigned char buf[PP_SAMPLE_MAX_SIZE + 8];
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	size_t len = make_sample(buf + 1, 3, 5); /* odd offset: decoding must not need alignment */

	REQUIRE(pp_record_decode(buf + 1, len, &d, &st) == 0);
	CHECK(d.kind == PP_DECODED_SAMPLE);
	CHECK_EQ_U64(d.sample.tgid, 4242);
	CHECK_EQ_U64(d.sample.tid, 4243);
	CHECK_EQ_U64(d.sample.ip, 0x401136);
	CHECK_EQ_U64(d.sample.data_src, 0x1e05080021ull);
	CHECK_EQ_U64(pp_decoded_frame(&d, 0), 0xffffffff81000000ull);
	CHECK_EQ_U64(pp_decoded_frame(&d, 2), 0xffffffff81000002ull);
	CHECK_EQ_U64(pp_decoded_frame(&d, 3), 0x400003ull);
	CHECK_EQ_U64(pp_decoded_frame(&d, 7), 0x400007ull);
	CHECK_STR(d.sample.comm, "worker-thread-1"); /* terminated by the decoder */
	CHECK_EQ_U64(st.samples, 1);
}

TEST(ring_buffer_padding_is_accepted)
{
	/* The ring buffer rounds records up to 8 bytes; len may exceed hdr.size. */
	unsigned char buf[PP_SAMPLE_MAX_SIZE + 16] = {0};
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	size_t len = make_sample(buf, 0, 1);

	CHECK(pp_record_decode(buf, len + 8, &d, &st) == 0);
}

TEST(truncated_records)
{
	unsigned char buf[PP_SAMPLE_MAX_SIZE];
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	size_t len = make_sample(buf, 2, 2);

	CHECK(pp_record_decode(buf, 0, &d, &st) == -EPROTO);
	CHECK(pp_record_decode(buf, 7, &d, &st) == -EPROTO);
	CHECK_EQ_U64(st.too_short, 2);
	/* Header claims more than was received. */
	CHECK(pp_record_decode(buf, len - 1, &d, &st) == -EPROTO);
	CHECK_EQ_U64(st.bad_size, 1);
	CHECK(pp_record_decode(NULL, 0, &d, &st) == -EPROTO);
}

TEST(inconsistent_stack_counts)
{
	unsigned char buf[PP_SAMPLE_MAX_SIZE + 64];
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	size_t len = make_sample(buf, 2, 2);
	struct pp_sample s;

	memcpy(&s, buf, sizeof(s));
	s.nr_ustack = 3; /* one frame more than the record holds */
	memcpy(buf, &s, sizeof(s));
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	s.nr_ustack = 2;
	s.nr_kstack = PP_MAX_STACK_DEPTH + 1;
	memcpy(buf, &s, sizeof(s));
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	CHECK_EQ_U64(st.bad_stack, 2);
	/* A sample header smaller than the fixed part. */
	s.hdr.size = sizeof(s) - 8;
	s.nr_kstack = s.nr_ustack = 0;
	memcpy(buf, &s, sizeof(s));
	CHECK(pp_record_decode(buf, sizeof(s), &d, &st) == -EPROTO);
	CHECK_EQ_U64(st.too_short, 1);
}

TEST(unknown_type_and_version)
{
	unsigned char buf[PP_SAMPLE_MAX_SIZE];
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	size_t len = make_sample(buf, 0, 0);
	struct pp_rec_hdr h;

	memcpy(&h, buf, sizeof(h));
	h.version = PP_RECORD_ABI_VERSION + 1;
	memcpy(buf, &h, sizeof(h));
	CHECK(pp_record_decode(buf, len, &d, &st) == -EOPNOTSUPP);
	CHECK_EQ_U64(st.bad_version, 1);
	h.version = PP_RECORD_ABI_VERSION;
	h.type = 77;
	memcpy(buf, &h, sizeof(h));
	CHECK(pp_record_decode(buf, len, &d, &st) == -EOPNOTSUPP);
	CHECK_EQ_U64(st.bad_type, 1);
	CHECK_EQ_U64(st.samples, 0);
}

TEST(task_events)
{
	struct pp_task_event ev = {.hdr = {PP_REC_TASK, PP_RECORD_ABI_VERSION, sizeof(ev)},
				   .tgid = 99,
				   .kind = PP_TASK_EXEC};
	struct pp_decode_stats st = {0};
	struct pp_decoded d;

	REQUIRE(pp_record_decode(&ev, sizeof(ev), &d, &st) == 0);
	CHECK(d.kind == PP_DECODED_TASK);
	CHECK_EQ_U64(d.task.tgid, 99);
	ev.kind = 42;
	CHECK(pp_record_decode(&ev, sizeof(ev), &d, &st) == -EOPNOTSUPP);
	ev.kind = PP_TASK_EXIT;
	ev.hdr.size = sizeof(ev) - 1;
	CHECK(pp_record_decode(&ev, sizeof(ev), &d, &st) == -EPROTO);
}

TEST(abi_layout)
{
	CHECK_EQ_U64(sizeof(struct pp_sample), 120);
	CHECK_EQ_U64(offsetof(struct pp_sample, tgid), 8);
	CHECK_EQ_U64(offsetof(struct pp_sample, time_ns), 16);
	CHECK_EQ_U64(offsetof(struct pp_sample, ip), 32);
	CHECK_EQ_U64(offsetof(struct pp_sample, comm), 104);
	CHECK_EQ_U64(offsetof(struct pp_sample, stack), 120);
	CHECK_EQ_U64(sizeof(struct pp_task_event), 24);
}

/* A sample with a copy of its stack (PP_SF_USTACK_RAW) after its frames. */
static size_t add_copy(unsigned char *buf, size_t len, uint32_t copy_len, uint32_t said_len)
{
	struct pp_raw_ustack raw = {
	    .ip = 0x401200, .sp = 0x7ffc0000f000ull, .bp = 0x7ffc0000f100ull, .len = said_len};
	struct pp_sample s;

	memcpy(&s, buf, sizeof(s));
	s.flags |= PP_SF_USTACK_RAW;
	s.hdr.size = (uint32_t)(len + sizeof(raw) + copy_len);
	memcpy(buf, &s, sizeof(s));
	memcpy(buf + len, &raw, sizeof(raw));
	for (uint32_t i = 0; i < copy_len; i++)
		buf[len + sizeof(raw) + i] = (unsigned char)(i * 7);
	return len + sizeof(raw) + copy_len;
}

TEST(stack_copies)
{
	static unsigned char buf[PP_SAMPLE_RAW_MAX_SIZE + 64];
	struct pp_decode_stats st = {0};
	struct pp_decoded d;
	size_t base = make_sample(buf, 1, 3), len = add_copy(buf, base, 4096, 4096);

	REQUIRE(pp_record_decode(buf, len, &d, &st) == 0);
	CHECK(d.raw_bytes == buf + base + sizeof(struct pp_raw_ustack));
	CHECK_EQ_U64(d.raw.len, 4096);
	CHECK_EQ_U64(d.raw.sp, 0x7ffc0000f000ull);
	CHECK_EQ_U64(d.raw.ip, 0x401200);
	CHECK_EQ_U64(d.raw_bytes[4095], (unsigned char)(4095 * 7));
	CHECK_EQ_U64(pp_decoded_frame(&d, 3),
		     0x400000ull + 3); /* the frames stay where they were */
	/* the largest the shim writes */
	base = make_sample(buf, PP_MAX_STACK_DEPTH, PP_MAX_STACK_DEPTH);
	len = add_copy(buf, base, PP_RAW_USTACK_MAX, PP_RAW_USTACK_MAX);
	CHECK_EQ_U64(len, PP_SAMPLE_RAW_MAX_SIZE);
	CHECK(pp_record_decode(buf, len, &d, &st) == 0);
	CHECK_EQ_U64(st.samples, 2);
	/* a copy longer than its record says, than the most there is, empty, or no header */
	base = make_sample(buf, 1, 3);
	len = add_copy(buf, base, 100, 101);
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	base = make_sample(buf, 0, 0);
	len = add_copy(buf, base, PP_RAW_USTACK_MAX + 8, PP_RAW_USTACK_MAX + 8);
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	base = make_sample(buf, 1, 3);
	len = add_copy(buf, base, 0, 0);
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	base = make_sample(buf, 1, 3);
	len = add_copy(buf, base, 0, 0) - 8;
	memcpy(buf, &(struct pp_rec_hdr){PP_REC_SAMPLE, PP_RECORD_ABI_VERSION, (uint32_t)len}, 8);
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	CHECK_EQ_U64(st.bad_raw, 4);
	/* without the flag, bytes after the frames are an error, as ever */
	base = make_sample(buf, 1, 3);
	len = add_copy(buf, base, 64, 64);
	{
		struct pp_sample s;

		memcpy(&s, buf, sizeof(s));
		s.flags &= (uint16_t)~PP_SF_USTACK_RAW;
		memcpy(buf, &s, sizeof(s));
	}
	CHECK(pp_record_decode(buf, len, &d, &st) == -EPROTO);
	CHECK_EQ_U64(st.bad_stack, 1);
	/* a sample without a copy has none */
	len = make_sample(buf, 1, 3);
	REQUIRE(pp_record_decode(buf, len, &d, &st) == 0);
	CHECK(d.raw_bytes == NULL);
}

TEST_LIST = {
    {"valid_sample_with_stacks", valid_sample_with_stacks},
    {"ring_buffer_padding_is_accepted", ring_buffer_padding_is_accepted},
    {"truncated_records", truncated_records},
    {"inconsistent_stack_counts", inconsistent_stack_counts},
    {"unknown_type_and_version", unknown_type_and_version},
    {"task_events", task_events},
    {"abi_layout", abi_layout},
    {"stack_copies", stack_copies},
};
TEST_MAIN()
