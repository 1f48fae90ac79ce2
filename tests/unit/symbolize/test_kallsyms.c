/*
 * Tests of the /proc/kallsyms parser: fixture text with modules, aliases, non-text symbols and
 * a malformed line; the kptr_restrict case (all addresses zero); the same lines in any order;
 * and, as root, the running kernel's own /proc/kallsyms checked against its text, and the
 * on-demand mode (the kernel naming addresses through BPF) against the parsed table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "symbolize/kallsyms.h"

static char *read_text(const char *path, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((r = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				close(fd);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static struct pp_kallsyms *load_fixture(const char *name)
{
	char path[1024];
	size_t len;
	char *text;
	struct pp_kallsyms *k;
	int err;

	snprintf(path, sizeof(path), "%s/kallsyms/%s", PP_TEST_DATA_DIR, name);
	text = read_text(path, &len);
	if (!text) {
		fprintf(stderr, "  cannot read %s\n", path);
		errno = EIO;
		return NULL;
	}
	k = pp_kallsyms_parse(text, len);
	err = errno;
	free(text);
	errno = err;
	return k;
}

TEST(fixture_symbols_and_modules)
{
	struct pp_kallsyms *k = load_fixture("basic.txt");
	const char *mod = "unset";
	uint64_t start = 0;

	REQUIRE(k != NULL);
	/* 16 text lines with addresses, two alias groups folded (3 -> 1, 2 -> 1). */
	CHECK_EQ_U64(pp_kallsyms_count(k), 14);
	CHECK_EQ_U64(pp_kallsyms_bad_lines(k), 1);

	/* Aliases: the name without leading underscores; global T over local t. */
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81000000ull, &start, &mod), "startup_64");
	CHECK_EQ_U64(start, 0xffffffff81000000ull);
	CHECK(mod == NULL);
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81001000ull, NULL, NULL), "schedule");
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff810011ffull, &start, NULL), "schedule");
	CHECK_EQ_U64(start, 0xffffffff81001000ull);
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81000150ull, NULL, NULL), "secondary_startup_64");
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81000400ull, NULL, NULL), "arch_weak_hook");

	/* A data symbol between text symbols is not a boundary: the function extends over it. */
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81000650ull, &start, NULL), "do_one_initcall");
	CHECK_EQ_U64(start, 0xffffffff81000500ull);

	/* The core kernel's last symbol stops at the end of the next page; data beyond: none. */
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81002fffull, NULL, NULL), "_etext");
	CHECK(pp_kallsyms_lookup(k, 0xffffffff81003000ull, NULL, NULL) == NULL);
	CHECK(pp_kallsyms_lookup(k, 0xffffffff82000040ull, NULL, NULL) == NULL);
	CHECK(pp_kallsyms_lookup(k, 0xffffffff80ffffffull, NULL, NULL) == NULL);
	CHECK(pp_kallsyms_lookup(k, 0, NULL, NULL) == NULL);

	/* Module text, with the module's name. */
	mod = NULL;
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffffc0001090ull, &start, &mod), "nft_do_chain");
	CHECK_STR(mod, "nf_tables");
	CHECK_EQ_U64(start, 0xffffffffc0001080ull);
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffffc0002fffull, NULL, &mod), "nft_lookup_eval");
	CHECK_STR(mod, "nf_tables");
	/* Between modules: the gap belongs to no symbol. */
	CHECK(pp_kallsyms_lookup(k, 0xffffffffc0003000ull, NULL, NULL) == NULL);
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffffc0004400ull, NULL, &mod), "ext4_get_block");
	CHECK_STR(mod, "ext4");
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffffc0010010ull, NULL, &mod),
		  "bpf_prog_6deef7357e7b4530_sd_fw_ingress");
	CHECK_STR(mod, "bpf");
	/* The last line has no newline and still counts. */
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffffc0020004ull, NULL, &mod),
		  "last_symbol_no_newline");
	CHECK_STR(mod, "tail");
	CHECK(pp_kallsyms_lookup(k, 0xffffffffc0022000ull, NULL, NULL) == NULL);

	/* find: names of kept symbols only. */
	CHECK(pp_kallsyms_find(k, "ext4_fill_super", &start) == 0);
	CHECK_EQ_U64(start, 0xffffffffc0004000ull);
	CHECK(pp_kallsyms_find(k, "some_data_object", &start) == -ENOENT);
	CHECK(pp_kallsyms_find(k, "no_such_symbol", &start) == -ENOENT);
	pp_kallsyms_free(k);
}

TEST(zero_addresses_mean_kptr_restrict)
{
	struct pp_kallsyms *k = load_fixture("zeroed.txt");

	CHECK(k == NULL);
	CHECK_EQ_U64(errno, EPERM);
	pp_kallsyms_free(k);
}

TEST(no_text_or_bad_arguments)
{
	struct pp_kallsyms *k = load_fixture("no_text.txt");

	CHECK(k == NULL);
	CHECK_EQ_U64(errno, ENOENT);
	k = pp_kallsyms_parse("", 0);
	CHECK(k == NULL);
	CHECK_EQ_U64(errno, ENOENT);
	k = pp_kallsyms_parse(NULL, 10);
	CHECK(k == NULL);
	CHECK_EQ_U64(errno, EINVAL);
	/* Over-long addresses and names, missing fields: all skipped as bad lines. */
	{
		static const char text[] = "1ffffffff81000000 T too_many_digits\n"
					   "ffffffff81000000 T\n"
					   "ffffffff81000000T glued\n"
					   "ffffffff81000000 T ok_symbol\t[unterminated\n"
					   "ffffffff81000000 T good_one\n";

		k = pp_kallsyms_parse(text, sizeof(text) - 1);
		REQUIRE(k != NULL);
		CHECK_EQ_U64(pp_kallsyms_count(k), 1);
		CHECK_EQ_U64(pp_kallsyms_bad_lines(k), 4);
		CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81000000ull, NULL, NULL), "good_one");
		pp_kallsyms_free(k);
	}
	/* The parser never reads past len: the symbol name is cut where len ends. */
	{
		static const char text[] = "ffffffff81000000 T abcdef";

		k = pp_kallsyms_parse(text, sizeof(text) - 1 - 3);
		REQUIRE(k != NULL);
		CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81000000ull, NULL, NULL), "abc");
		pp_kallsyms_free(k);
	}
	pp_kallsyms_free(NULL);
}

TEST(load_from_proc_root)
{
	char root[1024];
	struct pp_kallsyms *k;

	snprintf(root, sizeof(root), "%s/kallsyms/proc", PP_TEST_DATA_DIR);
	k = pp_kallsyms_load(root);
	REQUIRE(k != NULL);
	CHECK_EQ_U64(pp_kallsyms_count(k), 14);
	CHECK_STR(pp_kallsyms_lookup(k, 0xffffffff81001004ull, NULL, NULL), "schedule");
	pp_kallsyms_free(k);

	snprintf(root, sizeof(root), "%s/kallsyms/no-such-dir", PP_TEST_DATA_DIR);
	k = pp_kallsyms_load(root);
	CHECK(k == NULL);
	CHECK_EQ_U64(errno, ENOENT);
}

/* Whether text holds a line "<addr> [tTwW] <name>" (an alias at that address). */
static int text_has_symbol(const char *text, uint64_t addr, const char *name)
{
	char needle[700];
	const char *types = "tTwW";

	for (const char *t = types; *t; t++) {
		const char *p = text;
		size_t nl;

		nl = (size_t)snprintf(needle, sizeof(needle), "%016llx %c %s",
				      (unsigned long long)addr, *t, name);
		while ((p = strstr(p, needle))) {
			char after = p[nl];

			if ((p == text || p[-1] == '\n') &&
			    (after == '\n' || after == '\t' || after == '\0'))
				return 1;
			p += nl;
		}
	}
	return 0;
}

TEST(real_proc_kallsyms)
{
	struct pp_kallsyms *k;
	unsigned long long addr = 0;
	const char *name, *mod, *p, *line;
	uint64_t start = 0;
	size_t len;
	char *text;

	if (geteuid() != 0)
		SKIP("not root: /proc/kallsyms shows zero addresses to unprivileged readers");
	k = pp_kallsyms_load(NULL);
	if (!k && errno == EPERM)
		SKIP("kernel.kptr_restrict hides kernel addresses even from root here");
	REQUIRE(k != NULL);
	text = read_text("/proc/kallsyms", &len);
	REQUIRE(text != NULL);
	CHECK(pp_kallsyms_count(k) > 1000);

	/* The address of "schedule", read from the text, maps back to schedule. */
	p = strstr(text, " T schedule\n");
	REQUIRE(p != NULL);
	line = p;
	while (line > text && line[-1] != '\n')
		line--;
	REQUIRE(sscanf(line, "%llx", &addr) == 1);
	name = pp_kallsyms_lookup(k, addr, &start, &mod);
	REQUIRE(name != NULL);
	CHECK_EQ_U64(start, addr);
	CHECK(mod == NULL);
	/* schedule itself, or an alias at the same address that the text names. */
	CHECK(strcmp(name, "schedule") == 0 || text_has_symbol(text, addr, name));
	CHECK_STR(pp_kallsyms_lookup(k, addr + 4, &start, NULL), name);
	CHECK_EQ_U64(start, addr);

	/* A module text symbol, when any module is loaded, resolves with its module. */
	for (p = strstr(text, "\t["); p; p = strstr(p + 2, "\t[")) {
		char sym[512], modname[256];
		unsigned long long a;
		char type;

		line = p;
		while (line > text && line[-1] != '\n')
			line--;
		if (sscanf(line, "%llx %c %511s [%255[^]]]", &a, &type, sym, modname) != 4)
			continue;
		if (type != 't' && type != 'T')
			continue;
		name = pp_kallsyms_lookup(k, a, &start, &mod);
		REQUIRE(name != NULL);
		CHECK_EQ_U64(start, a);
		CHECK_STR(mod, modname);
		CHECK(strcmp(name, sym) == 0 || text_has_symbol(text, a, name));
		break;
	}
	free(text);
	pp_kallsyms_free(k);
}

/*
 * The parser sorts only what follows the sorted prefix and merges it in: every order of the
 * same lines must give the same table, aliases included wherever they sit.
 */
TEST(order_of_lines_does_not_matter)
{
	enum { N = 600 };
	static const char *const types = "tTwW";
	char *sorted = malloc(N * 64), *mixed = malloc(N * 64);
	size_t slen = 0, mlen = 0;
	struct pp_kallsyms *a, *b;
	unsigned perm[N];

	REQUIRE(sorted && mixed);
	/* Every third address carries two aliases of different types and underscores. */
	for (unsigned i = 0; i < N; i++) {
		unsigned long long addr = 0xffffffff81000000ull + (i / 2) * 0x40;
		const char *mod = i >= N - 60 ? "\t[modx]" : "";

		if (i >= N - 60)
			addr = 0xffffffffc0000000ull + (i / 2) * 0x40;
		slen += (size_t)snprintf(sorted + slen, 64, "%016llx %c %.*sf%u%s\n", addr,
					 types[i % 4], (int)(i % 3), "__", i, mod);
	}
	/* A fixed permutation: the core part rotated, the module lines moved to the front. */
	for (unsigned i = 0; i < N; i++)
		perm[i] = (i * 7919u + 13u) % N;
	{
		const char *lines[N];
		const char *p = sorted;

		for (unsigned i = 0; i < N; i++) {
			lines[i] = p;
			p = strchr(p, '\n') + 1;
		}
		for (unsigned i = 0; i < N; i++) {
			const char *l = lines[perm[i]];
			size_t ll = (size_t)(strchr(l, '\n') - l) + 1;

			memcpy(mixed + mlen, l, ll);
			mlen += ll;
		}
	}
	a = pp_kallsyms_parse(sorted, slen);
	b = pp_kallsyms_parse(mixed, mlen);
	REQUIRE(a != NULL && b != NULL);
	CHECK_EQ_U64(pp_kallsyms_count(a), N / 2);
	CHECK_EQ_U64(pp_kallsyms_count(b), N / 2);
	for (unsigned i = 0; i < N / 2; i++) {
		for (uint64_t off = 0; off < 0x41; off += 0x20) {
			uint64_t base =
			    i >= (N - 60) / 2 ? 0xffffffffc0000000ull : 0xffffffff81000000ull;
			uint64_t addr = base + i * 0x40 + off, sa = 1, sb = 2;
			const char *ma = "x", *mb = "y";
			const char *na = pp_kallsyms_lookup(a, addr, &sa, &ma);
			const char *nb = pp_kallsyms_lookup(b, addr, &sb, &mb);

			REQUIRE(na != NULL && nb != NULL);
			CHECK_STR(na, nb);
			CHECK_EQ_U64(sa, sb);
			CHECK((ma == NULL) == (mb == NULL));
		}
	}
	/* Pair 0 is "t f0" and "T _f1": the global wins over the local despite the underscore. */
	CHECK_STR(pp_kallsyms_lookup(b, 0xffffffff81000000ull, NULL, NULL), "_f1");
	/* Pair 1 is "w __f2" and "W f3": the upper-case weak ranks first. */
	CHECK_STR(pp_kallsyms_lookup(b, 0xffffffff81000040ull, NULL, NULL), "f3");
	pp_kallsyms_free(a);
	pp_kallsyms_free(b);
	free(sorted);
	free(mixed);
}

/* Opens the on-demand mode, or says why it cannot run here. */
static struct pp_kallsyms *open_lazy_or_skip(const char *root, size_t budget, int *skip)
{
	struct pp_kallsyms *k;

	*skip = 0;
	if (geteuid() != 0) {
		*skip = 1;
		return NULL;
	}
	k = pp_kallsyms_open_lazy(root, budget);
	if (!k) {
		fprintf(stderr, "  on-demand kernel symbols unavailable: %s\n", strerror(errno));
		*skip = 1;
	}
	return k;
}

/*
 * On demand, the kernel names addresses: every sampled text symbol (at its start, one byte
 * in, and further in) gets the table's start and module, and the table's name or an alias
 * at the same address.
 */
TEST(on_demand_agrees_with_the_table)
{
	struct pp_kallsyms_stats st;
	struct pp_kallsyms *lz, *t;
	size_t n = 0, checked = 0;
	uint64_t a1 = 0, a2 = 0;
	char *text, *p;
	size_t len;
	int skip;

	lz = open_lazy_or_skip(NULL, 100000, &skip);
	if (skip)
		SKIP("needs root and a kernel that runs BPF syscall programs (5.16+)");
	t = pp_kallsyms_load(NULL);
	if (!t && errno == EPERM) {
		pp_kallsyms_free(lz);
		SKIP("kernel.kptr_restrict hides kernel addresses even from root here");
	}
	REQUIRE(t != NULL);
	text = read_text("/proc/kallsyms", &len);
	REQUIRE(text != NULL);
	for (p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		unsigned long long addr;
		char type;

		if (sscanf(p, "%llx %c", &addr, &type) != 2 || !strchr("tTwW", type))
			continue;
		/* BPF programs come and go (other tests load them): not a stable answer. */
		{
			const char *nl = strchr(p, '\n');

			if (nl && nl - p > 5 && strncmp(nl - 5, "[bpf]", 5) == 0)
				continue;
		}
		if (n++ % 61 != 0)
			continue;
		for (uint64_t off = 0; off < 3; off++) {
			uint64_t q = addr + off * off * 3, s1 = 1, s2 = 2;
			const char *m1 = "x", *m2 = "y";
			const char *n1 = pp_kallsyms_lookup(lz, q, &s1, &m1);
			const char *n2 = pp_kallsyms_lookup(t, q, &s2, &m2);

			if (!n2 || s2 != addr)
				continue; /* a symbol shorter than the offset, or an end marker */
			checked++;
			REQUIRE(n1 != NULL);
			CHECK_EQ_U64(s1, s2);
			CHECK((m1 == NULL && m2 == NULL) || (m1 && m2 && strcmp(m1, m2) == 0));
			if (strcmp(n1, n2) != 0)
				CHECK(text_has_symbol(text, s2, n1));
		}
	}
	CHECK(checked > 1000);
	pp_kallsyms_get_stats(lz, &st);
	CHECK(st.on_demand == 1);
	CHECK(st.table_loaded == 0);
	CHECK(st.queries > 0 && st.queries <= checked);
	CHECK(st.hits > 0); /* one byte in, after the start was asked: a kept symbol */
	CHECK_EQ_U64(pp_kallsyms_count(lz), st.queries);

	/* find asks the kernel; for a function it agrees with the table. */
	CHECK(pp_kallsyms_find(lz, "schedule", &a1) == 0);
	CHECK(pp_kallsyms_find(t, "schedule", &a2) == 0);
	CHECK_EQ_U64(a1, a2);
	CHECK(pp_kallsyms_find(lz, "no_such_symbol_in_any_kernel", &a1) == -ENOENT);
	free(text);
	pp_kallsyms_free(lz);
	pp_kallsyms_free(t);
}

/*
 * Past its question budget, or on an address the kernel cannot name, the on-demand mode reads
 * the file whole and answers from it; the fixture root makes that visible.
 */
TEST(on_demand_falls_back_to_the_file)
{
	struct pp_kallsyms_stats st;
	struct pp_kallsyms *lz;
	char root[1024];
	uint64_t sched = 0, start = 0;
	const char *first, *mod = "x";
	int skip;

	snprintf(root, sizeof(root), "%s/kallsyms/proc", PP_TEST_DATA_DIR);
	lz = open_lazy_or_skip(root, 1, &skip);
	if (skip)
		SKIP("needs root and a kernel that runs BPF syscall programs (5.16+)");
	/* One question: answered by the running kernel. */
	REQUIRE(pp_kallsyms_find(lz, "schedule", &sched) == 0);
	first = pp_kallsyms_lookup(lz, sched, &start, NULL);
	REQUIRE(first != NULL);
	CHECK_EQ_U64(start, sched);
	pp_kallsyms_get_stats(lz, &st);
	CHECK_EQ_U64(st.queries, 1);
	CHECK(st.table_loaded == 0);
	/* Inside the kept symbol: no question. */
	CHECK_STR(pp_kallsyms_lookup(lz, sched + 1, NULL, NULL), first);
	pp_kallsyms_get_stats(lz, &st);
	CHECK_EQ_U64(st.queries, 1);
	CHECK_EQ_U64(st.hits, 1);
	/* Budget spent: the fixture file answers now, with its modules. */
	CHECK_STR(pp_kallsyms_lookup(lz, 0xffffffffc0001090ull, &start, &mod), "nft_do_chain");
	CHECK_STR(mod, "nf_tables");
	CHECK_EQ_U64(start, 0xffffffffc0001080ull);
	pp_kallsyms_get_stats(lz, &st);
	CHECK(st.table_loaded == 1);
	CHECK_EQ_U64(pp_kallsyms_count(lz), 14);
	CHECK_EQ_U64(pp_kallsyms_bad_lines(lz), 1);
	pp_kallsyms_free(lz);

	/*
	 * Addresses the kernel has no symbol for (user space's, here): each page is asked once and
	 * answers nothing, the file unread, until 16 such pages; then the file decides.
	 */
	lz = open_lazy_or_skip(root, 0, &skip);
	REQUIRE(lz != NULL);
	CHECK(pp_kallsyms_lookup(lz, 0x1000, NULL, NULL) == NULL);
	CHECK(pp_kallsyms_lookup(lz, 0x1ff8, &start, NULL) == NULL);
	pp_kallsyms_get_stats(lz, &st);
	CHECK_EQ_U64(st.queries, 1);
	CHECK_EQ_U64(st.unresolved, 1);
	CHECK_EQ_U64(st.hits, 1);
	CHECK(st.table_loaded == 0);
	for (uint64_t page = 2; page <= 15; page++)
		CHECK(pp_kallsyms_lookup(lz, page << 12 | 0x10, NULL, NULL) == NULL);
	pp_kallsyms_get_stats(lz, &st);
	CHECK_EQ_U64(st.unresolved, 15);
	CHECK(st.table_loaded == 0);
	/* a kernel address still asks the kernel, and is named */
	CHECK(pp_kallsyms_lookup(lz, sched, NULL, NULL) != NULL);
	pp_kallsyms_get_stats(lz, &st);
	CHECK(st.table_loaded == 0);
	/* the 16th page: the file is read, and answers from then on (its modules too) */
	CHECK(pp_kallsyms_lookup(lz, 0x10010, NULL, NULL) == NULL);
	pp_kallsyms_get_stats(lz, &st);
	CHECK_EQ_U64(st.unresolved, 16);
	CHECK(st.table_loaded == 1);
	CHECK_STR(pp_kallsyms_lookup(lz, 0xffffffffc0001090ull, &start, &mod), "nft_do_chain");
	pp_kallsyms_free(lz);
}

TEST_LIST = {
    {"fixture_symbols_and_modules", fixture_symbols_and_modules},
    {"zero_addresses_mean_kptr_restrict", zero_addresses_mean_kptr_restrict},
    {"no_text_or_bad_arguments", no_text_or_bad_arguments},
    {"load_from_proc_root", load_from_proc_root},
    {"real_proc_kallsyms", real_proc_kallsyms},
    {"order_of_lines_does_not_matter", order_of_lines_does_not_matter},
    {"on_demand_agrees_with_the_table", on_demand_agrees_with_the_table},
    {"on_demand_falls_back_to_the_file", on_demand_falls_back_to_the_file},
};
TEST_MAIN()
