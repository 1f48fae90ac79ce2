/*
 * Exporter-private parser of the W3C-baggage-style "k=v,k2=v2" lists of the OTEL_*
 * environment variables (resource attributes, extra headers): splits on commas, trims blanks,
 * skips blank pairs, percent-decodes keys and values, and lets the last value of a repeated
 * key win. What a key or value may hold, and how errors read, is the caller's rule.
 */
#ifndef PP_EXPORTER_KVLIST_H
#define PP_EXPORTER_KVLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-caller rules; each check returns NULL or what is wrong, as a static string. */
struct pp_kvlist_rules {
	/* The caller's element: a struct holding two const char * at key_off and val_off. */
	size_t elem_size, key_off, val_off;
	uint32_t max;	      /* most distinct keys; one more is -E2BIG */
	const char *too_many; /* the why of that -E2BIG */
	bool nocase_keys;     /* repeated keys are found ignoring case */
	bool reject_nul;      /* refuse %00 as soon as it is decoded */
	const char *(*check_key)(const char *k, size_t klen);	/* may be NULL */
	const char *(*check_value)(const char *v, size_t vlen); /* may be NULL */
	/* Writes the error (err non-NULL, errlen > 0) for pair number pairno, raw [p, pe). */
	void (*report)(char *err, size_t errlen, uint32_t pairno, const char *p, const char *pe,
		       const char *why);
};

/* Trims [*s, *e) of the blanks (space, tab) the syntax allows around keys and values. */
void pp_kvlist_trim(const char **s, const char **e);

/*
 * Parses [buf, buf + len) into *out, an array of *n elements that points into one block
 * (free() it) holding the decoded strings too; *out is NULL when no pair is given. Returns 0,
 * -EINVAL (bad arguments, or a bad pair: err says which), -E2BIG or -ENOMEM.
 */
int pp_kvlist_parse(const char *buf, size_t len, const struct pp_kvlist_rules *r, void **out,
		    uint32_t *n, char *err, size_t errlen);

#endif
