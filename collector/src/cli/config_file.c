/*
 * The configuration file of `pebsprof run`: `key = value` lines keyed by the long flags'
 * names, `#` comments, optional quotes; read whole within a bound, from a regular file only.
 */
#define _GNU_SOURCE /* strndup */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"

/* ---- config file ----------------------------------------------------------------------- */

/* Suggests 'output-dir' for 'output_dir' or 'OUTPUT-DIR'. */
static int key_suggest(const char *s, size_t n)
{
	char norm[64];

	if (n >= sizeof(norm))
		return -1;
	for (size_t i = 0; i < n; i++)
		norm[i] = s[i] == '_' ? '-' : (char)tolower((unsigned char)s[i]);
	return pp_cfg_key_lookup_n(norm, n);
}

/*
 * Parses the value part of a line: "quoted \"text\"", 'literal', or bare text ending at the
 * line end or at whitespace followed by '#'. The result goes to *out (malloc'd).
 */
static int parse_value(const char *s, size_t n, char **out, size_t *outlen, const char **why)
{
	char *v = malloc(n + 1);
	size_t o = 0, i = 0;

	if (!v)
		return -ENOMEM;
	*why = NULL;
	if (n && (s[0] == '"' || s[0] == '\'')) {
		char q = s[0];

		for (i = 1; i < n && s[i] != q; i++) {
			if (q == '"' && s[i] == '\\') {
				if (i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\')) {
					v[o++] = s[++i];
					continue;
				}
				*why = "an unknown escape in a quoted value (only \\\" and \\\\)";
				goto bad;
			}
			v[o++] = s[i];
		}
		if (i == n) {
			*why = "an unterminated quote";
			goto bad;
		}
		for (i++; i < n && pp_cfg_is_ows(s[i]); i++)
			;
		if (i < n && s[i] != '#') {
			*why = "text after the closing quote";
			goto bad;
		}
	} else {
		for (i = 0; i < n; i++) {
			if (s[i] == '#' && (i == 0 || pp_cfg_is_ows(s[i - 1])))
				break;
			v[o++] = s[i];
		}
		while (o && pp_cfg_is_ows(v[o - 1]))
			o--;
	}
	v[o] = '\0';
	*out = v;
	*outlen = o;
	return 0;
bad:
	free(v);
	return -EINVAL;
}

int pp_config_file_parse(const char *buf, size_t len, const char *name, struct pp_run_config *c,
			 struct pp_config_errors *errs)
{
	size_t seen[PP_CFG_NKEYS] = {0};
	size_t pos = 0, lineno = 0;
	int ret = 0;

	while (pos < len) {
		const char *line = buf + pos, *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos, i = 0, ks, kl;
		char loc[PP_CONFIG_WHERE_LEN + 64];
		const char *why;
		char *val;
		size_t vl;
		int k, r;

		pos += n + 1;
		lineno++;
		if (n && line[n - 1] == '\r')
			n--;
		while (i < n && (pp_cfg_is_ows(line[i])))
			i++;
		if (i == n || line[i] == '#')
			continue;
		if (memchr(line, '\0', n)) {
			pp_cfg_err_add(errs, "%s:%zu: a NUL byte (is this a text file?)", name,
				       lineno);
			ret = -EINVAL;
			continue;
		}
		ks = i;
		while (i < n && !pp_cfg_is_ows(line[i]) && line[i] != '=')
			i++;
		kl = i - ks;
		while (i < n && pp_cfg_is_ows(line[i]))
			i++;
		if (!kl || i == n || line[i] != '=') {
			pp_cfg_err_add(errs, "%s:%zu: expected 'key = value', got '%.*s'", name,
				       lineno, (int)(n - ks > ECHO_LEN ? ECHO_LEN : n - ks),
				       line + ks);
			ret = -EINVAL;
			continue;
		}
		i++;
		while (i < n && pp_cfg_is_ows(line[i]))
			i++;
		k = pp_cfg_key_lookup_n(line + ks, kl);
		if (k < 0) {
			int sug = key_suggest(line + ks, kl);

			if (sug >= 0 && !(pp_cfg_table[sug].flags & F_NO_FILE))
				pp_cfg_err_add(errs,
					       "%s:%zu: unknown key '%.*s' (did you mean '%s'?)",
					       name, lineno, (int)(kl > ECHO_LEN ? ECHO_LEN : kl),
					       line + ks, pp_cfg_table[sug].name);
			else
				pp_cfg_err_add(errs, "%s:%zu: unknown key '%.*s'", name, lineno,
					       (int)(kl > ECHO_LEN ? ECHO_LEN : kl), line + ks);
			ret = -EINVAL;
			continue;
		}
		if (pp_cfg_table[k].flags & F_NO_FILE) {
			pp_cfg_err_add(errs,
				       "%s:%zu: '%s' cannot be set in a config file (it is a flag)",
				       name, lineno, pp_cfg_table[k].name);
			ret = -EINVAL;
			continue;
		}
		if (seen[k]) {
			pp_cfg_err_add(errs, "%s:%zu: '%s' is set twice (first at line %zu)", name,
				       lineno, pp_cfg_table[k].name, seen[k]);
			ret = -EINVAL;
			continue;
		}
		seen[k] = lineno;
		r = parse_value(line + i, n - i, &val, &vl, &why);
		if (r == -ENOMEM) {
			pp_cfg_err_add(errs, "%s:%zu: out of memory", name, lineno);
			return -ENOMEM;
		}
		if (r) {
			pp_cfg_err_add(errs, "%s:%zu: '%s': %s", name, lineno, pp_cfg_table[k].name,
				       why);
			ret = -EINVAL;
			continue;
		}
		snprintf(loc, sizeof(loc), "%s:%zu: '%s'", name, lineno, pp_cfg_table[k].name);
		r = pp_cfg_apply(c, k, val, vl, errs, loc);
		free(val);
		if (r == -ENOMEM)
			return r;
		if (r) {
			ret = -EINVAL;
			continue;
		}
		pp_cfg_set_origin(c, k, PP_SRC_FILE, "%s:%zu", name, lineno);
	}
	return ret;
}

#define MAX_CONFIG_FILE (1024 * 1024)

/*
 * The config file, opened so that nothing but a regular file is read: a FIFO or a device
 * put at its path would block start-up forever or read without end.
 */
static FILE *open_config_file(const char *path, struct pp_config_errors *errs)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	FILE *f;

	if (fd < 0) {
		pp_cfg_err_add(
		    errs, "cannot read config file '%s': %s (check --config or PEBSPROF_CONFIG)",
		    path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		pp_cfg_err_add(
		    errs,
		    "config file '%s' is not a regular file (a directory, FIFO, socket or "
		    "device); give the path of a file (check --config or PEBSPROF_CONFIG)",
		    path);
		close(fd);
		return NULL;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	f = fdopen(fd, "r");
	if (!f) {
		pp_cfg_err_add(errs, "cannot read config file '%s': %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

int pp_config_file_load(const char *path, struct pp_run_config *c, struct pp_config_errors *errs)
{
	FILE *f = open_config_file(path, errs);
	char *buf;
	size_t n;
	int ret;

	if (!f)
		return -EINVAL;
	buf = malloc(MAX_CONFIG_FILE + 1);
	if (!buf) {
		fclose(f);
		pp_cfg_err_add(errs, "%s: out of memory", path);
		return -ENOMEM;
	}
	n = fread(buf, 1, MAX_CONFIG_FILE + 1, f);
	if (ferror(f)) {
		/* a directory opens but does not read */
		ret = errno ? errno : EIO;
		pp_cfg_err_add(
		    errs, "cannot read config file '%s': %s (check --config or PEBSPROF_CONFIG)",
		    path, strerror(ret));
		fclose(f);
		free(buf);
		return -EINVAL;
	}
	fclose(f);
	if (n > MAX_CONFIG_FILE) {
		pp_cfg_err_add(errs, "config file '%s' is larger than %d bytes", path,
			       MAX_CONFIG_FILE);
		free(buf);
		return -EINVAL;
	}
	ret = pp_config_file_parse(buf, n, path, c, errs);
	free(buf);
	return ret;
}
