/*
 * What naming costs, per new address and in memory. For each ELF file given, the table is
 * built twice, from the file's own .symtab (the peer) and from a stripped copy named through
 * its separate debug file (the build-id path under a debug directory), and N distinct
 * addresses inside its functions are named through both; a perf map of the same functions is
 * parsed and named through too. Prints, per file: the load time of each table, ns per new
 * address for each source, and the ratios against .symtab. Then the agent's memory with all
 * the debug-file tables held at once: RSS growth and the symbol cache's own count.
 *
 * usage: pp_bench_symbolize [-n ADDRS] [-r REPS] [-t] DEBUGDIR STRIPPED:UNSTRIPPED...
 *   DEBUGDIR holds .build-id/xx/rest.debug for every STRIPPED file (bench_symbolize.sh makes
 *   it); -t prints key=value lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/debug_file.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/perf_map.h"
#include "symbolize/symcache.h"

#define MAX_REPS 31
#define MAX_FILES 16

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long rss_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* n addresses spread over the functions of s (each inside one), in a shuffled order. */
static uint64_t *pick_addresses(const struct pp_elf_symbols *s, size_t n)
{
	size_t nf = pp_elf_symbols_count(s);
	uint64_t *a = malloc(n * sizeof(*a)), x = 88172645463325252ull;

	if (!a || !nf) {
		free(a);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct pp_elf_symbol *f;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		f = pp_elf_symbols_get(s, x % nf);
		a[i] = f->start + (f->end > f->start ? (x >> 32) % (f->end - f->start) : 0);
	}
	return a;
}

/* ns per address named through the table; *named how many got a name. */
static double name_all(const struct pp_elf_symbols *s, const uint64_t *a, size_t n, size_t *named)
{
	double t0 = now_ns();
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += pp_elf_symbols_lookup(s, a[i], NULL) != NULL;
	*named = k;
	return (now_ns() - t0) / (double)n;
}

/* The functions of s as perf map text. */
static char *perf_map_text(const struct pp_elf_symbols *s, size_t *len)
{
	size_t nf = pp_elf_symbols_count(s), cap = nf * 64 + 1, off = 0;
	char *buf = malloc(cap);

	for (size_t i = 0; buf && i < nf; i++) {
		const struct pp_elf_symbol *f = pp_elf_symbols_get(s, i);
		int w = snprintf(
		    buf + off, cap - off, "%llx %llx %s\n", (unsigned long long)f->start,
		    (unsigned long long)(f->end > f->start ? f->end - f->start : 1), f->name);

		if (w < 0 || (size_t)w >= cap - off) {
			char *nb = realloc(buf, cap * 2 + (size_t)w);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap = cap * 2 + (size_t)w;
			i--;
			continue;
		}
		off += (size_t)w;
	}
	*len = off;
	return buf;
}

int main(int argc, char **argv)
{
	size_t n = 200000;
	int reps = 5, kv = 0, opt;
	struct pp_debug_dirs *dirs;
	struct pp_symcache *cache;
	long rss0, rss1;

	/* the agent's allocator settings (cmd_run.c), so RSS reads as the agent's would */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_ARENA_MAX, 2);
	while ((opt = getopt(argc, argv, "n:r:th")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 't':
			kv = 1;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n ADDRS] [-r REPS] [-t] DEBUGDIR "
				"STRIPPED:UNSTRIPPED...\n",
				argv[0]);
			return 2;
		}
	}
	if (reps < 1 || reps > MAX_REPS || n == 0 || argc - optind < 2 ||
	    argc - optind - 1 > MAX_FILES) {
		fprintf(stderr, "pp_bench_symbolize: bad arguments (-h)\n");
		return 2;
	}
	dirs = pp_debug_dirs_new(argv[optind]);
	if (!dirs) {
		perror("debug dir");
		return 1;
	}
	if (!kv)
		printf("%-22s %7s %11s %11s %9s %9s %8s %8s %8s %9s\n", "file", "funcs",
		       "load_symtab", "load_debug", "ns_symtab", "ns_debug", "ns_pmap", "debug/st",
		       "pmap/st", "ns_pm_line");
	for (int i = optind + 1; i < argc; i++) {
		char *spec = strdup(argv[i]), *colon = strchr(spec, ':');
		double ld_sym[MAX_REPS], ld_dbg[MAX_REPS], ns_sym[MAX_REPS], ns_dbg[MAX_REPS];
		double ns_map[MAX_REPS], parse_map[MAX_REPS];
		const char *base;
		size_t named_sym = 0, named_dbg = 0, named_map = 0, funcs = 0, maplen = 0;

		if (!colon) {
			fprintf(stderr, "pp_bench_symbolize: %s is not STRIPPED:UNSTRIPPED\n",
				spec);
			return 2;
		}
		*colon = '\0';
		base = strrchr(spec, '/') ? strrchr(spec, '/') + 1 : spec;
		for (int r = 0; r < reps; r++) {
			double t0 = now_ns();
			struct pp_elf_symbols *full = pp_elf_symbols_open_path(colon + 1);
			struct pp_symcache *c;
			const struct pp_elf_symbols *viadbg;
			struct pp_perf_map *pm;
			uint64_t *addrs;
			char *text;

			ld_sym[r] = now_ns() - t0;
			c = pp_symcache_new(4, 1ull << 30);
			pp_symcache_set_debug_dirs(c, dirs);
			t0 = now_ns();
			viadbg = pp_symcache_get_file(c, spec, NULL);
			ld_dbg[r] = now_ns() - t0;
			if (!full || !viadbg ||
			    pp_elf_symbols_source(viadbg) != PP_SYMBOLS_DEBUG_FILE) {
				fprintf(stderr, "pp_bench_symbolize: %s: %s\n", spec,
					!full || !viadbg ? strerror(errno)
							 : "its debug file was not found");
				return 1;
			}
			funcs = pp_elf_symbols_count(full);
			addrs = pick_addresses(full, n);
			if (!addrs) {
				fprintf(stderr, "pp_bench_symbolize: %s has no functions\n",
					colon + 1);
				return 1;
			}
			ns_sym[r] = name_all(full, addrs, n, &named_sym);
			ns_dbg[r] = name_all(viadbg, addrs, n, &named_dbg);
			text = perf_map_text(full, &maplen);
			pm = pp_perf_map_new(SIZE_MAX, SIZE_MAX);
			t0 = now_ns();
			pp_perf_map_feed(pm, text, maplen, 1);
			parse_map[r] = (now_ns() - t0) / (double)(funcs ? funcs : 1);
			t0 = now_ns();
			named_map = 0;
			for (size_t k = 0; k < n; k++)
				named_map += pp_perf_map_lookup(pm, addrs[k], NULL) != NULL;
			ns_map[r] = (now_ns() - t0) / (double)n;
			pp_perf_map_free(pm);
			free(text);
			free(addrs);
			pp_symcache_free(c);
			pp_elf_symbols_free(full);
		}
		{
			double a = median(ld_sym, reps), b = median(ld_dbg, reps);
			double x = median(ns_sym, reps), y = median(ns_dbg, reps);
			double z = median(ns_map, reps), p = median(parse_map, reps);

			if (kv)
				printf("file=%s funcs=%zu load_symtab_ms=%.2f load_debug_ms=%.2f "
				       "ns_per_addr_symtab=%.1f ns_per_addr_debug=%.1f "
				       "ns_per_addr_perf_map=%.1f ns_per_perf_map_line=%.1f "
				       "ratio_debug_symtab=%.3f ratio_perf_map_symtab=%.3f "
				       "named=%zu/%zu/%zu\n",
				       base, funcs, a / 1e6, b / 1e6, x, y, z, p, y / x, z / x,
				       named_sym, named_dbg, named_map);
			else
				printf(
				    "%-22.22s %7zu %9.2fms %9.2fms %9.1f %9.1f %8.1f %8.3f %8.3f "
				    "%9.1f\n",
				    base, funcs, a / 1e6, b / 1e6, x, y, z, y / x, z / x, p);
		}
		free(spec);
	}

	/* memory: every stripped file's debug symbols held at once, as the agent holds them */
	cache = pp_symcache_new(64, 1ull << 30);
	pp_symcache_set_debug_dirs(cache, dirs);
	rss0 = rss_kib();
	for (int i = optind + 1; i < argc; i++) {
		char *spec = strdup(argv[i]);

		*strchr(spec, ':') = '\0';
		(void)pp_symcache_get_file(cache, spec, NULL);
		free(spec);
	}
	rss1 = rss_kib();
	if (kv)
		printf("memory_rss_growth_kib=%ld symbol_cache_bytes=%zu\n", rss1 - rss0,
		       pp_symcache_bytes(cache));
	else
		printf("\nall debug-file tables held: RSS +%.1f MiB, symbol cache counts %.1f MiB "
		       "(default bound 24 MiB)\n",
		       (double)(rss1 - rss0) / 1024, (double)pp_symcache_bytes(cache) / 1048576);
	pp_symcache_free(cache);
	pp_debug_dirs_free(dirs);
	return 0;
}
