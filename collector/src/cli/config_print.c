/*
 * Printing `pebsprof run`'s configuration: --dry-run (each value and where it came from,
 * secrets never shown) and the usage generated from the option table.
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

#include "agent/health.h"

#include "config_internal.h"

/* ---- printing ------------------------------------------------------------------------------ */

static void print_quoted(const char *s, FILE *f)
{
	size_t n = strlen(s);
	bool plain = n && !strpbrk(s, " \t#\"'\\"); /* spaces would blur the trailer */

	if (plain) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* s percent-encoded where the list's syntax needs it, so the line parses back to it. */
static void print_pct(const char *s, FILE *f)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || strchr("-._~:/@!$&'()*+;", *p))
			fputc(*p, f);
		else
			fprintf(f, "%%%02X", *p);
	}
}

static void print_kv(const struct pp_kv_list *l, bool header_names, bool secret, FILE *f)
{
	for (size_t i = 0; i < l->n; i++) {
		fputs(i ? "," : "", f);
		/* header names are tokens, printed as they are; attribute keys were decoded */
		if (header_names)
			fputs(l->items[i].key, f);
		else
			print_pct(l->items[i].key, f);
		fputc('=', f);
		if (secret) {
			fputs("<redacted>", f);
			continue;
		}
		print_pct(l->items[i].value, f);
	}
}

/* In the largest unit that divides it: "1ms", "500us", "0". */
static void print_duration(uint64_t ns, FILE *f)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {{"s", NS_PER_S}, {"ms", 1000000}, {"us", 1000}, {"ns", 1}};

	for (size_t i = 0; ns && i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns % units[i].ns == 0) {
			fprintf(f, "%llu%s", (unsigned long long)(ns / units[i].ns), units[i].name);
			return;
		}
	}
	fputs("0", f);
}

static void print_secs(uint64_t ns, FILE *f)
{
	char frac[16];
	size_t n;

	if (ns % NS_PER_S == 0) {
		fprintf(f, "%llu", (unsigned long long)(ns / NS_PER_S));
		return;
	}
	snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(ns % NS_PER_S));
	for (n = strlen(frac); n > 1 && frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	fprintf(f, "%llu.%s", (unsigned long long)(ns / NS_PER_S), frac);
}

static void print_size(uint64_t v, FILE *f)
{
	if (v && v % GIB == 0)
		fprintf(f, "%lluGiB", (unsigned long long)(v / GIB));
	else if (v && v % MIB == 0)
		fprintf(f, "%lluMiB", (unsigned long long)(v / MIB));
	else if (v && v % KIB == 0)
		fprintf(f, "%lluKiB", (unsigned long long)(v / KIB));
	else
		fprintf(f, "%llu", (unsigned long long)v);
}

void pp_run_config_print(const struct pp_run_config *c, FILE *f)
{
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const struct option_def *o = &pp_cfg_table[k];
		const void *p = pp_cfg_cfield(c, k);
		char where[PP_CONFIG_WHERE_LEN + 16];

		if (o->flags & F_NO_PRINT)
			continue;
		fprintf(f, "%s = ", o->name);
		switch (o->type) {
		case T_URL: {
			const char *u = *(char *const *)p;
			size_t n = strlen(u ? u : "") + 16;
			char *red = malloc(n);

			if (red) {
				pp_cfg_url_redact(u ? u : "", red, n);
				print_quoted(red, f);
				free(red);
			}
			break;
		}
		case T_STR:
		case T_PATH:
		case T_EVENT:
		case T_LISTEN: {
			const char *s = *(char *const *)p;

			if (o->flags & F_SECRET)
				fputs(s && *s ? "<redacted>" : "\"\"", f);
			else
				print_quoted(s ? s : "", f);
			break;
		}
		case T_KV: {
			const struct pp_kv_list *l = p;

			if (!l->n)
				fputs("\"\"", f);
			else
				print_kv(l, k == PP_CFG_HEADERS, o->flags & F_SECRET, f);
			break;
		}
		case T_U64:
			fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)p);
			break;
		case T_SECS:
			print_secs(*(const uint64_t *)p, f);
			break;
		case T_DURATION:
			print_duration(*(const uint64_t *)p, f);
			break;
		case T_SIZE:
			print_size(*(const uint64_t *)p, f);
			break;
		case T_ENUM:
			fputs(o->names[*(const int *)p], f);
			break;
		case T_BOOL:
			fputs(*(const int *)p ? "true" : "false", f);
			break;
		case T_SET: {
			int bits = *(const int *)p, n = 0;

			for (int i = 0; o->names[i]; i++)
				if (bits & (1 << i))
					fprintf(f, "%s%s", n++ ? "," : "", o->names[i]);
			if (!n)
				fputs("none", f);
			break;
		}
		}
		if (c->origin[k].src == PP_SRC_DEFAULT)
			fputs("   (default)\n", f);
		else
			fprintf(f, "   (from %s)\n",
				pp_cfg_origin_text(c, k, where, sizeof(where)));
	}
}

void pp_run_config_usage(FILE *f)
{
	fprintf(f,
		"usage: pebsprof run [--endpoint URL] [--config FILE] [OPTIONS]\n"
		"\n"
		"Samples this machine continuously and exports a profile every interval: to an\n"
		"OTLP endpoint (OpenTelemetry Collector, Pyroscope) or, without one, to rolling\n"
		"files in output-dir.\n"
		"\n");
	for (int k = 0; k < PP_CFG_NKEYS; k++) {
		const struct option_def *o = &pp_cfg_table[k];
		char left[64];
		const char *h = o->help;
		int n;

		if (o->short_flag)
			n = snprintf(left, sizeof(left), "  -%c, --%s", o->short_flag, o->name);
		else
			n = snprintf(left, sizeof(left), "      --%s", o->name);
		if (o->metavar)
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->metavar);
		fprintf(f, "%-30s", left);
		if (strlen(left) >= 30)
			fprintf(f, "\n%30s", "");
		/* continuation lines of the help are indented under the first */
		for (const char *nl; (nl = strchr(h, '\n')); h = nl + 1)
			fprintf(f, "%.*s\n%30s", (int)(nl - h), h, "");
		fprintf(f, "%s\n", h);
		if (o->type != T_BOOL && o->def && *o->def)
			fprintf(f, "%30sdefault %s%s", "", o->def, o->env ? "; " : "\n");
		else if (o->env)
			fprintf(f, "%30s", "");
		if (o->env && o->env_base)
			fprintf(f, "env %s (used as is),\n%30sor %s + %s\n", o->env, "",
				o->env_base, PP_OTLP_PROFILES_PATH);
		else if (o->env)
			fprintf(f, "env %s\n", o->env);
	}
	fprintf(f,
		"\n"
		"Precedence: defaults < config file < environment < flags. The config file has\n"
		"`key = value` lines keyed by the long flags' names, `#` comments, and optional\n"
		"quotes around values. --dry-run shows each value and where it came from.\n"
		"\n" PP_HEALTH_USAGE);
}
