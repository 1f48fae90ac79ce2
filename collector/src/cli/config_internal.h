/*
 * What the parts of the configuration share (config.c, config_table.c, config_check.c,
 * config_file.c, config_env.c, config_print.c): the option table's shape and the helpers
 * that store a value for a key and say where it came from. Private to cli/.
 */
#ifndef PP_CLI_CONFIG_INTERNAL_H
#define PP_CLI_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum opt_type {
	T_STR,	    /* any text */
	T_PATH,	    /* non-empty text */
	T_EVENT,    /* an event spec */
	T_URL,	    /* "" or an http(s) URL */
	T_KV,	    /* k=v,... with percent-encoded values */
	T_U64,	    /* decimal in [min, max] */
	T_SECS,	    /* seconds, fractions allowed, stored in ns, in [min, max] ns */
	T_DURATION, /* a number and its unit (ns, us, ms, s), or 0; stored in ns, in [min, max] */
	T_SIZE,	    /* bytes with suffixes, in [min, max] */
	T_ENUM,	    /* one of names[], stored as int */
	T_SET,	    /* names[] separated by ',', or "none": stored as an int of bits 1 << index */
	T_BOOL,	    /* true/false..., stored as int; a flag without a value */
	T_LISTEN,   /* "" or ADDR:PORT */
};

#define F_SECRET 0x1  /* values never printed */
#define F_NO_FILE 0x2 /* not a config-file key */
#define F_NO_PRINT 0x4

struct option_def {
	const char *name; /* long flag and config-file key */
	char short_flag;
	const char *env;      /* environment variable, NULL: none */
	const char *env_base; /* a base URL variable the profiles path is appended to */
	enum opt_type type;
	size_t offset;	 /* into struct pp_run_config */
	const char *def; /* default as text, NULL: zero / computed */
	uint64_t min, max;
	const char *const *names; /* T_ENUM */
	const char *metavar;
	const char *help;
	unsigned flags;
};

#define NS_PER_S 1000000000ull
#define KIB 1024ull
#define MIB (1024ull * 1024)
#define GIB (1024ull * 1024 * 1024)
#define OFF(f) offsetof(struct pp_run_config, f)
#define MAX_KV_ITEMS 64
#define MAX_VALUE_LEN 4096
#define ECHO_LEN 80 /* how much of a bad value a message repeats */
#define DEFAULT_STALL_NS (30 * NS_PER_S)

extern const struct option_def pp_cfg_table[PP_CFG_NKEYS];
extern const char *const pp_cfg_exporter_names[];
extern const char *const pp_cfg_sample_label_names[]; /* PP_SAMPLE_LABEL_* bits, in order */

/* The table (config_table.c): a key by name, a key's field in a configuration. */
int pp_cfg_key_lookup_n(const char *name, size_t n);
void *pp_cfg_field(struct pp_run_config *c, int k);
const void *pp_cfg_cfield(const struct pp_run_config *c, int k);

/* Errors (config.c): a message added to errs; err set, -EINVAL returned. */
__attribute__((format(printf, 2, 3))) void pp_cfg_err_add(struct pp_config_errors *e,
							  const char *fmt, ...);
__attribute__((format(printf, 3, 4))) int pp_cfg_set_err(char *err, size_t errlen, const char *fmt,
							 ...);

/* Storing (config.c): whether a load sets key k, where its value came from, the value. */
bool pp_cfg_key_wanted(const struct pp_run_config *c, int k);
__attribute__((format(printf, 4, 5))) void
pp_cfg_set_origin(struct pp_run_config *c, int k, enum pp_config_source src, const char *fmt, ...);
/*
 * Stores [val, val+len) as key k; on a bad value adds "loc: reason" to errs. Returns 0,
 * -EINVAL or -ENOMEM.
 */
int pp_cfg_apply(struct pp_run_config *c, int k, const char *val, size_t len,
		 struct pp_config_errors *errs, const char *loc);

/* Values (config_check.c). */
bool pp_cfg_is_ows(char ch);
int pp_cfg_parse_bool(const char *s, int *out);
/* Copies a URL for messages and printing with any user:password@ replaced. */
void pp_cfg_url_redact(const char *u, char *out, size_t outlen);
/* Where key k's value came from, for messages: "file PATH:LINE", "env NAME", "flag --x"... */
const char *pp_cfg_origin_text(const struct pp_run_config *c, int k, char *buf, size_t len);

/* The environment (config_env.c). */
const char *pp_cfg_env_get(char *const *envp, const char *name);
/* base + the OTLP profiles path, malloc'ed, or NULL. */
char *pp_cfg_profiles_url(const char *base);
int pp_cfg_apply_env(struct pp_run_config *c, char *const *envp, struct pp_config_errors *errs);

#endif /* PP_CLI_CONFIG_INTERNAL_H */
