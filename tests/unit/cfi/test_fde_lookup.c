/*
 * Tests of the FDE lookup against the whole file's compile: at every row's address of the
 * whole table, and between rows, the row the lookup gives is the row the table holds, on
 * real files (the host's libc, libstdc++ and, where installed, a large library), through an
 * fd and through memory. Plus the files it leaves to the whole compile (.debug_frame), an
 * unsorted search table, garbage, and FDEs that are refused.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testfs.h"
#include "testsh.h"
#include "cfi/fde_lookup.h"
#include "cfi/unwind_table.h"

static const char *const host_files[] = {
    "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    "/usr/lib/x86_64-linux-gnu/libz3.so.4", /* 60k FDEs, where installed */
};

static bool same_rule(const struct pp_unwind_row *a, const struct pp_unwind_row *b)
{
	return a->cfa_rule == b->cfa_rule && a->cfa_off == b->cfa_off &&
	       a->rbp_rule == b->rbp_rule && a->rbp_off == b->rbp_off && a->ra_rule == b->ra_rule &&
	       a->ra_off == b->ra_off && a->flags == b->flags;
}

/* The lookup's row at pc: true with *out, false where it says no CFI. */
static bool lookup_at(struct pp_fde_lookup *l, struct pp_unwind_row *rows, uint64_t pc,
		      struct pp_unwind_row *out)
{
	uint64_t start, limit;
	size_t n;
	int ret = pp_fde_lookup_rows(l, pc, rows, &n, &start, &limit);

	if (ret <= 0)
		return false;
	if (!(start <= pc && pc < limit) || !n || rows[0].pc != start)
		return false;
	for (size_t i = n; i-- > 0;) {
		if (rows[i].pc <= pc) {
			*out = rows[i];
			return true;
		}
	}
	return false;
}

/*
 * Compares l with t at every row's pc and one byte before the next (at most max rows, spread
 * over the table): the number of disagreements.
 */
static size_t disagreements(struct pp_fde_lookup *l, const struct pp_unwind_table *t, size_t max,
			    size_t *checked)
{
	struct pp_unwind_row *rows = malloc(PP_FDE_MAX_ROWS * sizeof(*rows));
	size_t n = pp_unwind_table_count(t), step = n > max ? n / max : 1, bad = 0;

	*checked = 0;
	if (!rows)
		return SIZE_MAX;
	for (size_t i = 0; i < n; i += step) {
		struct pp_unwind_row r, next, want, got;
		uint64_t pcs[2];

		pp_unwind_table_get(t, i, &r);
		pcs[0] = r.pc;
		pcs[1] = i + 1 < n && pp_unwind_table_get(t, i + 1, &next) && next.pc > r.pc + 1
			     ? next.pc - 1
			     : r.pc;
		for (int k = 0; k < 2; k++) {
			bool have = pp_unwind_table_lookup(t, pcs[k], &want);
			bool found = lookup_at(l, rows, pcs[k], &got);

			(*checked)++;
			/* no row, or a row without CFI, say the same: walks stop there */
			if (!have || want.cfa_rule == PP_CFA_NONE) {
				if (found && got.cfa_rule != PP_CFA_NONE)
					bad++;
			} else if (!found || !same_rule(&want, &got)) {
				if (bad < 5)
					fprintf(stderr, "  pc 0x%llx: cfa %d%+d / %d%+d\n",
						(unsigned long long)pcs[k], want.cfa_rule,
						want.cfa_off, found ? got.cfa_rule : -1,
						found ? got.cfa_off : 0);
				bad++;
			}
		}
	}
	free(rows);
	return bad;
}

TEST(host_files_agree_with_the_whole_compile)
{
	size_t files = 0;

	for (size_t f = 0; f < sizeof(host_files) / sizeof(host_files[0]); f++) {
		int fd = open(host_files[f], O_RDONLY | O_CLOEXEC);
		struct pp_fde_lookup_stats st;
		struct pp_unwind_table *t;
		struct pp_fde_lookup *l;
		size_t checked, bad;

		if (fd < 0)
			continue;
		t = pp_unwind_table_open_fd(fd, 0);
		l = pp_fde_lookup_open_fd(fd);
		close(fd); /* the lookup keeps its own */
		REQUIRE(t != NULL);
		REQUIRE(l != NULL);
		CHECK(pp_fde_lookup_count(l) > 100);
		bad = disagreements(l, t, 20000, &checked);
		printf("  %s: %u FDEs, %zu addresses, %zu disagree\n", host_files[f],
		       pp_fde_lookup_count(l), checked, bad);
		CHECK(checked > 200);
		CHECK_EQ_U64(bad, 0);
		pp_fde_lookup_get_stats(l, &st);
		CHECK(st.lookups >= checked && st.entries_read > 0);
		CHECK_EQ_U64(st.refused, 0);
		{
			struct pp_unwind_load a[PP_UNWIND_MAX_LOADS], b[PP_UNWIND_MAX_LOADS];
			size_t na = pp_unwind_table_get_loads(t, a),
			       nb = pp_fde_lookup_get_loads(l, b);

			CHECK_EQ_U64(na, nb);
			CHECK(na == nb && !memcmp(a, b, na * sizeof(*a)));
		}
		pp_fde_lookup_free(l);
		pp_unwind_table_free(t);
		files++;
	}
	REQUIRE(files >= 2);
}

/* The file offset and size of section name in an ELF64 image, read from its headers: 0 if none. */
static long section_offset(const uint8_t *img, size_t len, const char *name, long *size)
{
	const Elf64_Ehdr *eh = (const void *)img;
	const Elf64_Shdr *sh, *str;

	*size = 0;
	if (len < sizeof(*eh) || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) > len ||
	    eh->e_shstrndx >= eh->e_shnum)
		return 0;
	sh = (const void *)(img + eh->e_shoff);
	str = &sh[eh->e_shstrndx];
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (str->sh_offset + sh[i].sh_name >= len)
			continue;
		if (!strcmp((const char *)img + str->sh_offset + sh[i].sh_name, name)) {
			*size = (long)sh[i].sh_size;
			return (long)sh[i].sh_offset;
		}
	}
	return 0;
}

TEST(memory_images_and_what_is_refused)
{
	const char *libc = host_files[0];
	struct pp_unwind_row *rows = malloc(PP_FDE_MAX_ROWS * sizeof(*rows));
	struct pp_unwind_table *t;
	struct pp_fde_lookup *l;
	char dir[512], path[600];
	size_t len, checked, n;
	uint64_t start, limit;
	long hdr_off, hdr_size;
	uint8_t *buf;

	REQUIRE(rows != NULL);
	buf = (uint8_t *)pp_test_read_file(libc, &len);
	REQUIRE(buf != NULL);
	/* the same image from memory */
	t = pp_unwind_table_open_mem(buf, len, 0);
	l = pp_fde_lookup_open_mem(buf, len);
	REQUIRE(t != NULL && l != NULL);
	CHECK_EQ_U64(disagreements(l, t, 2000, &checked), 0);
	/* below the first FDE: no CFI, and where the first one starts */
	CHECK(pp_fde_lookup_rows(l, 0, rows, &n, &start, &limit) == 0 && n == 0 && limit > 0);
	pp_fde_lookup_free(l);
	pp_unwind_table_free(t);

	/* a search table out of order is refused, not searched wrong */
	hdr_off = section_offset(buf, len, ".eh_frame_hdr", &hdr_size);
	REQUIRE(hdr_off > 0 && hdr_size > 12 + 16);
	{
		uint8_t tmp[8], *e = buf + hdr_off + 12;

		memcpy(tmp, e, 8);
		memcpy(e, e + 8, 8);
		memcpy(e + 8, tmp, 8);
		errno = 0;
		CHECK(pp_fde_lookup_open_mem(buf, len) == NULL && errno == EINVAL);
		memcpy(e + 8, e, 8);
		memcpy(e, tmp, 8);
	}
	/* FDEs whose CIE pointer leads nowhere: each a row without CFI, counted, no crash */
	{
		long eh_size, eh_off = section_offset(buf, len, ".eh_frame", &eh_size);
		struct pp_fde_lookup_stats st;
		size_t refused_rows = 0;

		REQUIRE(eh_off > 0);
		/* every FDE's CIE pointer (the word after its length) made to point past it */
		for (long off = 0; off + 8 <= eh_size;) {
			uint32_t n32, id;

			memcpy(&n32, buf + eh_off + off, 4);
			if (n32 == 0 || n32 == 0xffffffffu)
				break;
			memcpy(&id, buf + eh_off + off + 4, 4);
			if (id) {
				id = 0x7fffffffu;
				memcpy(buf + eh_off + off + 4, &id, 4);
			}
			off += 4 + (long)n32;
		}
		l = pp_fde_lookup_open_mem(buf, len);
		REQUIRE(l != NULL);
		for (uint64_t pc = limit; pc < limit + 0x20000; pc += 0x1000) {
			if (pp_fde_lookup_rows(l, pc, rows, &n, &start, &limit) == 1 && n == 1 &&
			    rows[0].cfa_rule == PP_CFA_NONE)
				refused_rows++;
		}
		pp_fde_lookup_get_stats(l, &st);
		CHECK(refused_rows > 10 && st.refused == refused_rows);
		pp_fde_lookup_free(l);
	}
	free(buf);

	/* garbage, and a file with .debug_frame (compiled whole) */
	errno = 0;
	CHECK(pp_fde_lookup_open_mem("not an ELF file", 15) == NULL && errno == ENOEXEC);
	if (pp_test_scratch_dir(dir, sizeof(dir), "pp-fde-lookup") == 0 &&
	    pp_test_sh("cd '%s' && printf 'int main(void) { return 0; }\\n' > p.c && "
		       "cc -O2 -g -fno-asynchronous-unwind-tables -o dbg p.c 2>/dev/null",
		       dir) == 0) {
		int fd;

		snprintf(path, sizeof(path), "%s/dbg", dir);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		REQUIRE(fd >= 0);
		errno = 0;
		CHECK(pp_fde_lookup_open_fd(fd) == NULL && errno == ENOTSUP);
		close(fd);
	}
	free(rows);
}

TEST_LIST = {
    {"host_files_agree_with_the_whole_compile", host_files_agree_with_the_whole_compile},
    {"memory_images_and_what_is_refused", memory_images_and_what_is_refused},
};
TEST_MAIN()
