/*
 * What unwind tables take: compiles the CFI of each ELF file named (one per line on stdin, or
 * the arguments), skipping files whose build id (or, without one, real path) was seen, until N
 * distinct files had tables, and prints per file and in all: rows, the words they take in the
 * shim's row array once packed (4 bytes each: rows and their pages' words), the distinct rules the
 * files share in the rule array, the bytes both take, the compile time, and with -s a digest of
 * the rows (each row's pc and rules), which shows that a change to the compiler left its output
 * as it was. bench/bench_unwind.sh runs it.
 *
 * usage: pp_bench_unwind_tables [-n N] [-q] [-s] [FILE...]
 *   -n  stop after N files with tables (default: all)
 *   -q  totals only
 *   -s  digests of the rows, per file and of all
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/record.h>

#include "symbolize/elf_symbols.h"
#include "unwind/unwind_pack.h"
#include "cfi/unwind_table.h"

#define MAX_IDS 100000

static char *g_ids[MAX_IDS];
static size_t g_nids;
static struct pp_unwind_rules *g_rules; /* shared by all files, as in the shim */
static int g_digests;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Whether this build id was seen before (remembered when not). */
static int seen(const char *id)
{
	for (size_t i = 0; i < g_nids; i++)
		if (!strcmp(g_ids[i], id))
			return 1;
	if (g_nids < MAX_IDS)
		g_ids[g_nids++] = strdup(id);
	return 0;
}

struct totals {
	unsigned long files, no_table, dup, too_big;
	unsigned long long rows, words, bytes;
	uint64_t digest; /* of every file's digest, in order */
	double ms;
};

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The rows, field by field (not the struct's bytes: its padding is no one's output). */
static uint64_t table_digest(const struct pp_unwind_table *tab)
{
	uint64_t h = 0xcbf29ce484222325ull;
	struct pp_unwind_row r;

	for (size_t i = 0; pp_unwind_table_get(tab, i, &r); i++) {
		int64_t f[] = {(int64_t)r.pc, r.cfa_rule, r.cfa_off, r.rbp_rule,
			       r.rbp_off,     r.ra_rule,  r.ra_off,  r.flags};

		h = fnv(h, f, sizeof(f));
	}
	return h;
}

static void one(const char *path, int quiet, struct totals *t)
{
	char id[128] = "";
	struct pp_unwind_table *tab;
	struct pp_unwind_packed pk;
	double t0, ms;
	uint64_t digest;
	size_t rows;
	int ret;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (pp_elf_read_build_id_fd(fd, id, sizeof(id)) != 0) { /* not an ELF file */
		close(fd);
		return;
	}
	if (!id[0]) { /* no build id: the same file under two names is one table too */
		char *real = realpath(path, NULL);

		snprintf(id, sizeof(id), "p:%s", real ? real : path);
		free(real);
	}
	if (seen(id)) {
		t->dup++;
		close(fd);
		return;
	}
	t0 = now_ms();
	tab = pp_unwind_table_open_fd(fd, 0);
	close(fd);
	if (!tab) {
		t->no_table++;
		return;
	}
	rows = pp_unwind_table_count(tab);
	/* packed held, not released: the dictionary counts every file's rules, as the shim would */
	ret = pp_unwind_pack(tab, g_rules, 0, &pk);
	ms = now_ms() - t0;
	t->ms += ms;
	if (ret) {
		fprintf(stderr, "%s: cannot pack its %zu rows: %s\n", path, rows, strerror(-ret));
		t->too_big++;
		pp_unwind_table_free(tab);
		return;
	}
	digest = g_digests ? table_digest(tab) : 0;
	t->digest = fnv(t->digest, &digest, sizeof(digest));
	t->files++;
	t->rows += rows;
	t->words += pk.nwords;
	t->bytes += (unsigned long long)pk.nwords * sizeof(uint32_t);
	if (!quiet) {
		printf("%10zu rows %10u words %8.2f MiB %5u new rules %8.2f ms  %s", rows,
		       pk.nwords, (double)pk.nwords * sizeof(uint32_t) / (1 << 20), pk.nnew, ms,
		       path);
		if (g_digests)
			printf("  digest %016llx", (unsigned long long)digest);
		printf("\n");
	}
	free(pk.words);
	free(pk.rules);
	free(pk.new_rules);
	pp_unwind_table_free(tab);
}

int main(int argc, char **argv)
{
	struct totals t = {.digest = 0xcbf29ce484222325ull};
	unsigned long max = 0;
	int quiet = 0, opt;
	char line[4096];

	g_rules = pp_unwind_rules_new(PP_UW_MAX_RULES);
	if (!g_rules)
		return 1;

	while ((opt = getopt(argc, argv, "n:qs")) != -1) {
		if (opt == 'n') {
			max = strtoul(optarg, NULL, 10);
		} else if (opt == 'q') {
			quiet = 1;
		} else if (opt == 's') {
			g_digests = 1;
		} else {
			fprintf(stderr, "usage: %s [-n N] [-q] [-s] [FILE...]\n", argv[0]);
			return 2;
		}
	}
	if (optind < argc) {
		for (int i = optind; i < argc && (!max || t.files < max); i++)
			one(argv[i], quiet, &t);
	} else {
		while ((!max || t.files < max) && fgets(line, sizeof(line), stdin)) {
			line[strcspn(line, "\n")] = '\0';
			if (line[0])
				one(line, quiet, &t);
		}
	}
	{
		uint32_t rules = pp_unwind_rules_count(g_rules);
		double rule_bytes = (double)rules * sizeof(struct pp_bpf_unwind_rule);

		printf(
		    "total: %lu files with tables (%lu without, %lu duplicate build ids skipped, "
		    "%lu that cannot be packed), %llu rows in %llu words: %.1f MiB of rows "
		    "(%.2f bytes a row), %u distinct rules (%.2f MiB), %.1f MiB in all (at 16 "
		    "bytes a row, unpacked: %.1f MiB); %.0f ms to compile",
		    t.files, t.no_table, t.dup, t.too_big, t.rows, t.words,
		    (double)t.bytes / (1 << 20), t.rows ? (double)t.bytes / (double)t.rows : 0.0,
		    rules, rule_bytes / (1 << 20), ((double)t.bytes + rule_bytes) / (1 << 20),
		    (double)t.rows * 16 / (1 << 20), t.ms);
		if (g_digests)
			printf("; rows digest %016llx", (unsigned long long)t.digest);
		printf("\n");
	}
	pp_unwind_rules_free(g_rules);
	for (size_t i = 0; i < g_nids; i++)
		free(g_ids[i]);
	return t.files ? 0 : 1;
}
