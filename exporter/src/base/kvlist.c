/*
 * Tokenizer and percent-decoder of the OTEL_* "k=v,k2=v2" lists (see kvlist.h), shared by
 * the resource-attribute and the header parsers so both read the same syntax.
 */
#include "kvlist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

void pp_kvlist_trim(const char **s, const char **e)
{
	while (*s < *e && is_blank(**s))
		(*s)++;
	while (*e > *s && is_blank((*e)[-1]))
		(*e)--;
}

/* Where the reading of one list stands. */
struct kv_iter {
	const char *p, *end; /* the input not yet read */
	char *strs;	     /* where the next decoded strings go */
	bool done;
	uint32_t pairno;	     /* the last pair read, from 1, blank ones counted */
	const char *pair, *pair_end; /* its raw text */
};

/* Percent-decodes [s, e) into out (room for e - s + 1); returns NULL or what is wrong. */
static const char *pct_decode(const char *s, const char *e, bool reject_nul, char *out,
			      size_t *outlen)
{
	char *o = out;

	while (s < e) {
		char c = *s++;

		if (c == '%') {
			int hi = e - s >= 2 ? hexval(s[0]) : -1;
			int lo = hi >= 0 ? hexval(s[1]) : -1;

			if (lo < 0)
				return "'%' is not followed by two hex digits";
			c = (char)(hi << 4 | lo);
			s += 2;
		}
		if (c == '\0' && reject_nul)
			return "it holds a NUL byte";
		*o++ = c;
	}
	*o = '\0';
	*outlen = (size_t)(o - out);
	return NULL;
}

/* Decodes one non-blank pair [ks, ve) (already trimmed) into kv->strs. */
static const char *decode_pair(struct kv_iter *kv, const struct pp_kvlist_rules *r, const char *ks,
			       const char *ve, const char **key, const char **val)
{
	const char *eq = memchr(ks, '=', (size_t)(ve - ks)), *ke, *vs, *why;
	char *k = kv->strs, *v;
	size_t klen, vlen;

	if (!eq)
		return "no '=' between key and value";
	ke = eq;
	vs = eq + 1;
	pp_kvlist_trim(&ks, &ke);
	pp_kvlist_trim(&vs, &ve);
	why = pct_decode(ks, ke, r->reject_nul, k, &klen);
	if (!why && r->check_key)
		why = r->check_key(k, klen);
	if (why)
		return why;
	v = k + klen + 1;
	why = pct_decode(vs, ve, r->reject_nul, v, &vlen);
	if (!why && r->check_value)
		why = r->check_value(v, vlen);
	if (why)
		return why;
	kv->strs = v + vlen + 1;
	*key = k;
	*val = v;
	return NULL;
}

/* Reads the next non-blank pair: 1 with *key and *val, 0 at the end, or -EINVAL and *why. */
static int next_pair(struct kv_iter *kv, const struct pp_kvlist_rules *r, const char **key,
		     const char **val, const char **why)
{
	while (!kv->done) {
		const char *pe = memchr(kv->p, ',', (size_t)(kv->end - kv->p)), *ks = kv->p, *ve;

		pe = pe ? pe : kv->end;
		kv->pair = kv->p;
		kv->pair_end = pe;
		kv->pairno++;
		if (pe == kv->end)
			kv->done = true;
		else
			kv->p = pe + 1;
		ve = pe;
		pp_kvlist_trim(&ks, &ve);
		if (ks == ve) /* blank pairs (a trailing comma) are skipped */
			continue;
		*why = decode_pair(kv, r, ks, ve, key, val);
		return *why ? -EINVAL : 1;
	}
	return 0;
}

static const char **field(char *elems, uint32_t i, const struct pp_kvlist_rules *r, size_t off)
{
	return (const char **)(void *)(elems + i * r->elem_size + off);
}

int pp_kvlist_parse(const char *buf, size_t len, const struct pp_kvlist_rules *r, void **out,
		    uint32_t *n, char *err, size_t errlen)
{
	struct kv_iter kv = {buf, NULL, NULL, false, 0, buf, buf};
	size_t pairs = 1;
	uint32_t count = 0;
	const char *key, *val, *why;
	char *elems;
	int ret;

	if ((!buf && len) || !out || !n)
		return -EINVAL;
	kv.end = buf ? buf + len : NULL;
	*out = NULL;
	*n = 0;
	if (err && errlen)
		err[0] = '\0';
	if (!len)
		return 0;
	for (size_t i = 0; i < len; i++)
		pairs += buf[i] == ',';
	/* One block: the elements, then their decoded strings (never longer than the input). */
	elems = malloc(pairs * r->elem_size + len + 2 * pairs);
	if (!elems)
		return -ENOMEM;
	kv.strs = elems + pairs * r->elem_size;

	while ((ret = next_pair(&kv, r, &key, &val, &why)) > 0) {
		uint32_t j;

		for (j = 0; j < count; j++) {
			const char *kj = *field(elems, j, r, r->key_off);

			if (!(r->nocase_keys ? strcasecmp(kj, key) : strcmp(kj, key)))
				break;
		}
		if (j < count) {
			*field(elems, j, r, r->val_off) =
			    val; /* the last value of a repeated key wins */
		} else if (count == r->max) {
			why = r->too_many;
			ret = -E2BIG;
			break;
		} else {
			*field(elems, count, r, r->key_off) = key;
			*field(elems, count, r, r->val_off) = val;
			count++;
		}
	}
	if (ret < 0) {
		if (err && errlen)
			r->report(err, errlen, kv.pairno, kv.pair, kv.pair_end, why);
		free(elems);
		return ret;
	}
	if (!count) {
		free(elems);
		return 0;
	}
	*out = elems;
	*n = count;
	return 0;
}
