/*
 * A small, strict pull parser for JSON (RFC 8259) over a caller's buffer: no allocation, no
 * recursion, bounded nesting. The caller walks the document (enter an object, step through its
 * members, read the strings it wants, skip the rest); everything skipped is still validated,
 * so a document that walks to the end with pp_json_finish() == 0 is valid JSON. Errors are
 * sticky: after the first one every call fails with the same code, so callers may check once.
 * Used for Kubernetes PodLists, which come from the network and are therefore untrusted.
 */
#ifndef PP_COLLECTOR_JSON_H
#define PP_COLLECTOR_JSON_H

#include <stddef.h>
#include <stdint.h>

/* Deepest nesting accepted; the bit stacks below hold one bit per level. */
#define PP_JSON_MAX_DEPTH 64

enum pp_json_type {
	PP_JSON_NONE = 0, /* end of input, or an error */
	PP_JSON_OBJECT,
	PP_JSON_ARRAY,
	PP_JSON_STRING,
	PP_JSON_NUMBER,
	PP_JSON_TRUE,
	PP_JSON_FALSE,
	PP_JSON_NULL,
};

/* A string as it stands in the buffer, between the quotes, escapes not yet decoded. */
struct pp_json_str {
	const char *p;
	size_t len;
	int escaped; /* holds a backslash: decode before comparing bytes */
};

struct pp_json {
	const char *buf;
	size_t len;
	size_t pos;
	unsigned depth;
	unsigned max_depth;
	uint64_t is_obj;   /* bit d: the container at depth d+1 is an object */
	uint64_t has_item; /* bit d: that container has had a member/element */
	int err;	   /* sticky: 0 or negative errno (-EPROTO malformed, -E2BIG too deep) */
};

/* Start walking buf[0..len). max_depth 0 or above PP_JSON_MAX_DEPTH means PP_JSON_MAX_DEPTH. */
void pp_json_init(struct pp_json *j, const char *buf, size_t len, unsigned max_depth);

/* Type of the next value (skipping white space) without consuming it; PP_JSON_NONE on error. */
enum pp_json_type pp_json_peek(struct pp_json *j);

/* Consume '{' / '['. 0, or -EPROTO when the next value is something else, -E2BIG too deep. */
int pp_json_enter_object(struct pp_json *j);
int pp_json_enter_array(struct pp_json *j);

/*
 * Step to the next member of the object entered last: 1 with *key set and the value next
 * (read or skip it before stepping again), 0 at the closing '}' (consumed), or an error.
 */
int pp_json_next_member(struct pp_json *j, struct pp_json_str *key);
/* Same for arrays: 1 with an element next, 0 at ']' (consumed), or an error. */
int pp_json_next_element(struct pp_json *j);

/* Consume a string value (validated: escapes, no control characters, UTF-8). 0 or error. */
int pp_json_read_string(struct pp_json *j, struct pp_json_str *out);
/* Consume any value, validating all of it. 0 or error. */
int pp_json_skip(struct pp_json *j);
/* Only white space may follow the top-level value. 0 or -EPROTO. */
int pp_json_finish(struct pp_json *j);

/*
 * Decode a validated string into out (NUL-terminated). Returns the decoded length, or -E2BIG
 * when it does not fit in cap-1 bytes, or -EILSEQ when it holds a NUL (\u0000), which C
 * strings cannot carry.
 */
int pp_json_str_decode(const struct pp_json_str *s, char *out, size_t cap);
/* 1 when the decoded string equals lit, else 0. */
int pp_json_str_eq(const struct pp_json_str *s, const char *lit);

#endif /* PP_COLLECTOR_JSON_H */
