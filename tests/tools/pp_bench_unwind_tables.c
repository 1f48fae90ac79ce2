/*
 * What unwind tables take: compiles the CFI of each ELF file named (one per line on stdin, or
 * the arguments), skipping files whose build id was seen, until N distinct files had tables,
 * and prints per file and in all: rows, the bytes they take in the shim's row array (16 per
 * row), and the compile time. bench/bench_unwind.sh runs it.
 *
 * usage: pp_bench_unwind_tables [-n N] [-q] [FILE...]
 *   -n  stop after N files with tables (default: all)
 *   -q  totals only
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pebsprof/record.h>

#include "symbolize/elf_symbols.h"
#include "unwind/unwind_table.h"

#define MAX_IDS 100000

static char *g_ids[MAX_IDS];
static size_t g_nids;

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
	unsigned long files, no_table, dup;
	unsigned long long rows, bytes;
	double ms;
};

static void one(const char *path, int quiet, struct totals *t)
{
	char id[128] = "";
	struct pp_unwind_table *tab;
	double t0;
	size_t rows;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (pp_elf_read_build_id_fd(fd, id, sizeof(id)) != 0) { /* not an ELF file */
		close(fd);
		return;
	}
	if (id[0] && seen(id)) {
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
	t->ms += now_ms() - t0;
	t->files++;
	t->rows += rows;
	t->bytes += rows * sizeof(struct pp_bpf_unwind_row);
	if (!quiet)
		printf("%10zu rows %10.2f MiB %8.2f ms  %s\n", rows,
		       (double)(rows * sizeof(struct pp_bpf_unwind_row)) / (1 << 20), now_ms() - t0,
		       path);
	pp_unwind_table_free(tab);
}

int main(int argc, char **argv)
{
	struct totals t = {0};
	unsigned long max = 0;
	int quiet = 0, opt;
	char line[4096];

	while ((opt = getopt(argc, argv, "n:q")) != -1) {
		if (opt == 'n') {
			max = strtoul(optarg, NULL, 10);
		} else if (opt == 'q') {
			quiet = 1;
		} else {
			fprintf(stderr, "usage: %s [-n N] [-q] [FILE...]\n", argv[0]);
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
	printf("total: %lu files with tables (%lu without, %lu duplicate build ids skipped), "
	       "%llu rows, %.1f MiB of rows, %.0f ms to compile\n",
	       t.files, t.no_table, t.dup, t.rows, (double)t.bytes / (1 << 20), t.ms);
	for (size_t i = 0; i < g_nids; i++)
		free(g_ids[i]);
	return t.files ? 0 : 1;
}
