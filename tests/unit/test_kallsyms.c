/*
 * Tests of the /proc/kallsyms parser: fixture text with modules, aliases, non-text symbols and
 * a malformed line; the kptr_restrict case (all addresses zero); and, as root, the running
 * kernel's own /proc/kallsyms checked against its text.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kallsyms.h"

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

TEST_LIST = {
    {"fixture_symbols_and_modules", fixture_symbols_and_modules},
    {"zero_addresses_mean_kptr_restrict", zero_addresses_mean_kptr_restrict},
    {"no_text_or_bad_arguments", no_text_or_bad_arguments},
    {"load_from_proc_root", load_from_proc_root},
    {"real_proc_kallsyms", real_proc_kallsyms},
};
TEST_MAIN()
