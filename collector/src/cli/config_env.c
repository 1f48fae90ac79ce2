/*
 * The environment of `pebsprof run`: each key's variable, and the OTEL_EXPORTER_OTLP_*
 * base URLs the profiles path is appended to.
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

#include "config_internal.h"

/* ---- environment ------------------------------------------------------------------------ */

const char *pp_cfg_env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++) {
		/* an empty variable counts as unset, as the OpenTelemetry SDKs do */
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return (*envp)[n + 1] ? *envp + n + 1 : NULL;
	}
	return NULL;
}

/* A base URL with the profiles signal's path after its own path (malloc'ed; NULL: memory). */
char *pp_cfg_profiles_url(const char *base)
{
	size_t bl = strlen(base);
	char *full;

	while (bl && base[bl - 1] == '/')
		bl--;
	return asprintf(&full, "%.*s%s", (int)bl, base, PP_OTLP_PROFILES_PATH) < 0 ? NULL : full;
}

int pp_cfg_apply_env(struct pp_run_config *c, char *const *envp, struct pp_config_errors *errs)
{
	char loc[160];
	int ret = 0;

	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const struct option_def *o = &pp_cfg_table[k];
		const char *v = o->env ? pp_cfg_env_get(envp, o->env) : NULL;
		int r;

		if (v) {
			snprintf(loc, sizeof(loc), "environment %s ('%s')", o->env, o->name);
			r = pp_cfg_apply(c, k, v, strlen(v), errs, loc);
			if (r == -ENOMEM)
				return r;
			if (r)
				ret = -EINVAL;
			else
				pp_cfg_set_origin(c, k, PP_SRC_ENV, "%s", o->env);
			continue;
		}
		v = o->env_base ? pp_cfg_env_get(envp, o->env_base) : NULL;
		if (v) {
			/* OTLP's base endpoint: the signal path goes after the base's own path */
			char *full = pp_cfg_profiles_url(v);

			if (!full)
				return -ENOMEM;
			snprintf(loc, sizeof(loc), "environment %s ('%s')", o->env_base, o->name);
			/* check the base as given, so the message shows what the user wrote */
			char why[PP_CONFIG_ERROR_LEN / 2];

			if (pp_url_check(v, strlen(v), why, sizeof(why))) {
				char red[ECHO_LEN + 16];

				pp_cfg_url_redact(v, red, sizeof(red));
				pp_cfg_err_add(errs, "%s: bad URL '%s': %s", loc, red, why);
				r = -EINVAL;
			} else {
				r = pp_cfg_apply(c, k, full, strlen(full), errs, loc);
			}
			free(full);
			if (r == -ENOMEM)
				return r;
			if (r)
				ret = -EINVAL;
			else
				pp_cfg_set_origin(c, k, PP_SRC_ENV, "%s", o->env_base);
		}
	}
	return ret;
}
