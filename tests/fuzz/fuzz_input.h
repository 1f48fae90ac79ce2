/*
 * Reading a structured fuzz input: bytes, big-endian words and short strings taken from the
 * front of the input, zeros once it runs out, so every input drives a whole sequence of calls.
 */
#ifndef PP_FUZZ_INPUT_H
#define PP_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct input {
	const uint8_t *d;
	size_t n, i;
};

static inline uint8_t byte(struct input *in)
{
	return in->i < in->n ? in->d[in->i++] : 0;
}

static inline uint64_t u64(struct input *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | byte(in);
	return v;
}

/* A string of up to maxlen - 1 bytes from the input (its length byte modulo maxlen); may hold
 * any byte but NUL. */
static inline void input_str(struct input *in, size_t maxlen, char *out, size_t outsz)
{
	size_t len = byte(in) % maxlen, j = 0;

	for (size_t i = 0; i < len && j + 1 < outsz; i++) {
		char c = (char)byte(in);

		if (c)
			out[j++] = c;
	}
	out[j] = '\0';
}

#endif /* PP_FUZZ_INPUT_H */
