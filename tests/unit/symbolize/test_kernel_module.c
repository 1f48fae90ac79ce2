/*
 * Tests of kernel_module.c: tests/programs/kernel_image built as a kernel module is (ld -r, a
 * relocatable object with DWARF and a build id) is laid out at addresses a kernel would give its
 * sections, and the data-type resolver names the fields its functions access, the same as in the
 * linked image: struct task.prio at task_prio's first instruction, struct rq_stats.nr_switches
 * through count_switch's RIP-relative operand (a relocation in the code). Field offsets are
 * checked with readelf, function offsets read with nm (binutils), not with the code under test.
 * Then the search, in a host root laid out as Debian installs a module and its -dbg file and a
 * sysfs tree as a kernel shows a loaded module; and files that must be refused.
 */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "kmod_fixture.h"
#include "testfs.h"
#include "symbolize/data_type.h"
#include "symbolize/kernel_image.h"
#include "symbolize/kernel_module.h"
#include "testsh.h"

#define MODULE PP_TEST_BUILD_DIR "/pp_kernel_module.ko"
#define RELEASE "6.1.0-99-amd64"
#define TEXT_ADDR 0xffffffffc0a01000ull

/* A kernel's placing of the module's allocated sections: .text first, the rest after it. */
#define LIVE_SECTIONS                                                                              \
	{".text", TEXT_ADDR}, {".data", 0xffffffffc0a06000ull}, {".bss", 0xffffffffc0a07000ull},   \
	    {".rodata", 0xffffffffc0a05000ull},                                                    \
	{                                                                                          \
		".note.gnu.build-id", 0xffffffffc0a04000ull                                        \
	}
static const struct pp_test_kmod_section live_files[] = {LIVE_SECTIONS};
static const struct pp_kmod_section live[] = {LIVE_SECTIONS};
#define NLIVE (sizeof(live) / sizeof(live[0]))

/* In the helpers that return a value: the fixture is broken, no case can run */
#define MUST(cond)                                                                                 \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  %s:%d: fixture broken: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static uint8_t *read_file(const char *path, size_t *len)
{
	uint8_t *buf = (uint8_t *)pp_test_read_file(path, len);

	MUST(buf != NULL && *len > 0);
	return buf;
}

/* A function's offset in the module's .text, as nm reads it */
static uint64_t func_offset(const char *func)
{
	char cmd[256], line[64];

	snprintf(cmd, sizeof(cmd), "nm " MODULE " | awk '$3 == \"%s\" && $2 ~ /[Tt]/ { print $1 }'",
		 func);
	pp_test_sh_line(cmd, line, sizeof(line));
	MUST(line[0] != '\0');
	return strtoull(line, NULL, 16);
}

/* The offset readelf's DWARF dump gives member in the module */
static long member_offset(const char *member)
{
	char cmd[512], line[64];

	snprintf(cmd, sizeof(cmd),
		 "readelf --debug-dump=info " MODULE " | awk '/DW_AT_name.*: %s$/ { m = 1 } "
		 "m && /DW_AT_data_member_location/ { print $NF; exit }'",
		 member);
	pp_test_sh_line(cmd, line, sizeof(line));
	MUST(line[0] != '\0');
	return strtol(line, NULL, 0);
}

static enum pp_data_type_miss resolve(struct pp_data_type_resolver *r, const char *func,
				      struct pp_data_type *t)
{
	memset(t, 0, sizeof(*t));
	return pp_data_type_resolve(r, TEXT_ADDR + func_offset(func), 0, t);
}

/* The module's accesses named as the source says, each offset as readelf says */
static void check_accesses(struct pp_data_type_resolver *r)
{
	struct pp_data_type t;
	char leaf[512];

	CHECK(resolve(r, "task_prio", &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct task");
	CHECK_STR(t.field, "prio");
	CHECK(t.offset == member_offset("prio"));
	CHECK(resolve(r, "task_account", &t) == PP_DT_RESOLVED);
	CHECK_STR(t.field, "runtime_ns");
	CHECK(t.is_store == 1);
	CHECK(resolve(r, "task_wakeups", &t) == PP_DT_RESOLVED);
	CHECK_STR(t.field, "rq.nr_wakeups");
	CHECK(t.offset == member_offset("rq") + member_offset("nr_wakeups"));
	/* a global of the module's, through a RIP-relative operand the layout relocated */
	CHECK(resolve(r, "count_switch", &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct rq_stats");
	CHECK_STR(t.field, "nr_switches");
	pp_data_type_format(&t, leaf, sizeof(leaf));
	CHECK_STR(leaf, "struct rq_stats.nr_switches");
}

TEST(a_module_laid_out_at_the_kernels_addresses_names_its_fields)
{
	struct pp_kmod_layout_stats st;
	struct pp_data_type_resolver *r;
	struct pp_data_type t;
	size_t len;
	uint8_t *raw = read_file(MODULE, &len), *img = malloc(len);

	REQUIRE(img != NULL);
	/* as built: every section at 0, its DWARF's addresses relocations not yet applied */
	REQUIRE(pp_test_sh("readelf -h " MODULE " | grep -q 'REL (Relocatable file)'") == 0);
	r = pp_data_type_resolver_open_mem(raw, len, NULL, 0, NULL);
	REQUIRE(r != NULL);
	CHECK(resolve(r, "task_prio", &t) != PP_DT_RESOLVED);
	pp_data_type_resolver_free(r);

	memcpy(img, raw, len);
	REQUIRE(pp_kmod_layout(img, len, live, NLIVE, &st) == 0);
	CHECK(st.placed >= 3); /* .text, .bss, the note (.data, .rodata where the build has them) */
	CHECK(st.relocations > 10);
	r = pp_data_type_resolver_open_mem(img, len, NULL, 0, NULL);
	REQUIRE(r != NULL);
	check_accesses(r);
	/* an address in no section the kernel placed */
	CHECK(pp_data_type_resolve(r, TEXT_ADDR - 0x1000, 0, &t) == PP_DT_NO_CODE);
	pp_data_type_resolver_free(r);

	/* laid out twice (a module loaded again elsewhere): the second layout holds */
	{
		struct pp_kmod_section moved[NLIVE];

		memcpy(moved, live, sizeof(moved));
		for (size_t i = 0; i < NLIVE; i++)
			moved[i].addr += 0x100000;
		memcpy(img, raw, len);
		REQUIRE(pp_kmod_layout(img, len, moved, NLIVE, NULL) == 0);
		r = pp_data_type_resolver_open_mem(img, len, NULL, 0, NULL);
		REQUIRE(r != NULL);
		CHECK(pp_data_type_resolve(r, TEXT_ADDR + 0x100000 + func_offset("task_prio"), 0,
					   &t) == PP_DT_RESOLVED);
		CHECK_STR(t.field, "prio");
		CHECK(resolve(r, "task_prio", &t) != PP_DT_RESOLVED);
		pp_data_type_resolver_free(r);
	}
	free(img);
	free(raw);
}

/* The first relocation of the module's .rela.debug_info, its entry's offset in the file */
static size_t debug_info_rela(const uint8_t *img, size_t len)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh, strtab;

	memcpy(&eh, img, sizeof(eh));
	memcpy(&strtab, img + eh.e_shoff + eh.e_shstrndx * sizeof(sh), sizeof(sh));
	for (size_t i = 0; i < eh.e_shnum; i++) {
		memcpy(&sh, img + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == SHT_RELA &&
		    !strcmp((const char *)img + strtab.sh_offset + sh.sh_name,
			    ".rela.debug_info")) {
			MUST(sh.sh_offset + sizeof(Elf64_Rela) <= len);
			return sh.sh_offset;
		}
	}
	MUST(!"a .rela.debug_info");
	return 0;
}

TEST(files_that_are_no_module_or_lie_are_refused)
{
	size_t len, at;
	uint8_t *raw = read_file(MODULE, &len), *img = malloc(len);
	Elf64_Rela rel;
	Elf64_Ehdr eh;

	REQUIRE(img != NULL);
	/* a linked image, not a relocatable object */
	{
		size_t ilen;
		uint8_t *linked = read_file(PP_TEST_BUILD_DIR "/pp_kernel_image", &ilen);

		CHECK(pp_kmod_layout(linked, ilen, live, NLIVE, NULL) == -ENOEXEC);
		free(linked);
	}
	CHECK(pp_kmod_layout(img, 10, live, NLIVE, NULL) == -ENOEXEC);
	/* the section table past the end */
	memcpy(img, raw, len);
	CHECK(pp_kmod_layout(img, len / 2, live, NLIVE, NULL) == -EINVAL);
	memcpy(&eh, img, sizeof(eh));
	eh.e_shstrndx = eh.e_shnum;
	memcpy(img, &eh, sizeof(eh));
	CHECK(pp_kmod_layout(img, len, live, NLIVE, NULL) == -EINVAL);
	/* a debug relocation past its section, of an unknown type, of a symbol not in the table */
	at = debug_info_rela(raw, len);
	memcpy(img, raw, len);
	memcpy(&rel, img + at, sizeof(rel));
	rel.r_offset = 1ull << 40;
	memcpy(img + at, &rel, sizeof(rel));
	CHECK(pp_kmod_layout(img, len, live, NLIVE, NULL) == -EINVAL);
	memcpy(img, raw, len);
	rel.r_offset = 0;
	rel.r_info = ELF64_R_INFO(ELF64_R_SYM(rel.r_info), 37 /* R_X86_64_GOTPC32_TLSDESC */);
	memcpy(img + at, &rel, sizeof(rel));
	CHECK(pp_kmod_layout(img, len, live, NLIVE, NULL) == -EOPNOTSUPP);
	memcpy(img, raw, len);
	rel.r_info = ELF64_R_INFO(0xffffffu, R_X86_64_64);
	memcpy(img + at, &rel, sizeof(rel));
	CHECK(pp_kmod_layout(img, len, live, NLIVE, NULL) == -EINVAL);
	/* what was refused is left as it was: the caller does not use it */
	memcpy(img, raw, len);
	CHECK(pp_kmod_layout(img, len, live, NLIVE, NULL) == 0);
	free(img);
	free(raw);
}

TEST(modules_dep_names_the_file_as_modprobe_matches_it)
{
	static const char dep[] =
	    "kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko\n"
	    "kernel/fs/xfs_extra/xfs_extra.ko:\n"
	    "\n"
	    "garbage without a colon\n"
	    "kernel/drivers/net/ethernet/intel/ixgbe/ixgbe.ko.xz: kernel/a.ko\n"
	    "kernel/drivers/usb/host/xhci-pci.ko: kernel/x.ko\n"
	    "kernel/drivers/pp/pp_kmod.ko.zst\n"
	    "kernel/net/nf_tables.kosher.ko:\n"
	    "updates/dkms/zfs.ko:";
	char rel[64];

	CHECK(pp_kmod_dep_find(dep, strlen(dep), "xfs", rel, sizeof(rel)) == 0);
	CHECK_STR(rel, "kernel/fs/xfs/xfs.ko");
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "xfs_extra", rel, sizeof(rel)) == 0);
	CHECK_STR(rel, "kernel/fs/xfs_extra/xfs_extra.ko");
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "ixgbe", rel, sizeof(rel)) == 0);
	CHECK_STR(rel, "kernel/drivers/net/ethernet/intel/ixgbe/ixgbe.ko.xz");
	/* kallsyms and sysfs say xhci_pci */
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "xhci_pci", rel, sizeof(rel)) == 0);
	CHECK_STR(rel, "kernel/drivers/usb/host/xhci-pci.ko");
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "zfs", rel, sizeof(rel)) == 0);
	CHECK_STR(rel, "updates/dkms/zfs.ko");
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "nf_tables", rel, sizeof(rel)) == -ENOENT);
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "pp_kmod", rel, sizeof(rel)) == -ENOENT);
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "xf", rel, sizeof(rel)) == -ENOENT);
	CHECK(pp_kmod_dep_find(dep, strlen(dep), "ixgbe", rel, 10) == -ENAMETOOLONG);
	CHECK(pp_kmod_name_valid("xhci_pci") && pp_kmod_name_valid("xhci-pci"));
	CHECK(!pp_kmod_name_valid("../etc") && !pp_kmod_name_valid("a/b") &&
	      !pp_kmod_name_valid(""));
}

struct fixture {
	char dir[4096], root[4200], sys[4200];
	char id[128];
};

static void module_id(char *out, size_t size)
{
	pp_test_sh_line("readelf -n " MODULE " | sed -n 's/.*Build ID: *//p'", out, size);
}

/* pp_kmod's files and sysfs in a scratch directory (kmod_fixture.h) */
static void fixture_init(struct fixture *f, const char *name, int with_debug)
{
	REQUIRE(pp_test_scratch_dir(f->dir, sizeof(f->dir), name) == 0);
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->sys, sizeof(f->sys), "%s/sys", f->dir);
	module_id(f->id, sizeof(f->id));
	REQUIRE(strlen(f->id) == 40);
	REQUIRE(pp_test_kmod_fixture(f->root, f->sys, MODULE, RELEASE, with_debug, f->id,
				     live_files, NLIVE) == 0);
}

static int open_module(const struct fixture *f, struct pp_kmod_image *img, char *why, size_t n)
{
	struct pp_kernel_image_opts o = {.root = f->root, .sys_root = f->sys, .release = RELEASE};

	return pp_kmod_image_open(&o, "pp_kmod", NULL, 64u << 20, img, why, n);
}

TEST(a_loaded_module_is_found_with_its_debug_file_and_laid_out)
{
	struct fixture f;
	struct pp_kmod_image img;
	struct pp_data_type_resolver *r;
	char why[1024];

	fixture_init(&f, "pp-kmod-found", 1);
	/* the installed module has no DWARF: its debug file has no code */
	REQUIRE(pp_test_sh("readelf -S '%s/lib/modules/" RELEASE
			   "/kernel/drivers/pp/pp_kmod.ko' | grep -q debug_info",
			   f.root) != 0);
	REQUIRE(pp_test_sh("readelf -SW '%s/usr/lib/debug/lib/modules/" RELEASE
			   "/kernel/drivers/pp/pp_kmod.ko' | grep -E ' \\.text ' | grep -q NOBITS",
			   f.root) == 0);
	REQUIRE(open_module(&f, &img, why, sizeof(why)) == 0);
	CHECK_STR(img.build_id, f.id);
	CHECK(img.text_addr == TEXT_ADDR);
	CHECK(img.dwarf != img.code);
	CHECK(strstr(img.path, "/usr/lib/debug/lib/modules/" RELEASE) != NULL);
	r = pp_data_type_resolver_open_mem(img.code, img.code_len, img.dwarf, img.dwarf_len, NULL);
	REQUIRE(r != NULL);
	check_accesses(r);
	pp_data_type_resolver_free(r);
	pp_kmod_image_fini(&img);
	uint64_t text = 0;
	CHECK(pp_kmod_text_addr(f.sys, "pp_kmod", &text) == 0 && text == TEXT_ADDR);
	CHECK(pp_kmod_text_addr(f.sys, "../pp_kmod", &text) == -EINVAL);
}

TEST(a_module_not_found_whole_or_of_another_build_is_said_why)
{
	struct fixture f;
	struct pp_kmod_image img;
	char why[1024];

	/* no debug file, and the module itself stripped */
	fixture_init(&f, "pp-kmod-nodebug", 0);
	CHECK(open_module(&f, &img, why, sizeof(why)) == -ENODATA);
	CHECK(strstr(why, "no debug file") != NULL);
	/* the loaded module is another build than the files */
	fixture_init(&f, "pp-kmod-other", 1);
	REQUIRE(pp_test_kmod_notes(f.sys, "00112233445566778899aabbccddeeff00112233") == 0);
	CHECK(open_module(&f, &img, why, sizeof(why)) == -ENOENT);
	CHECK(strstr(why, "another build") != NULL);
	/* not root: the kernel shows every section at 0 */
	fixture_init(&f, "pp-kmod-hidden", 1);
	REQUIRE(pp_test_kmod_sections(f.sys, live_files, NLIVE, 1) == 0);
	CHECK(open_module(&f, &img, why, sizeof(why)) == -EACCES);
	/* not loaded */
	fixture_init(&f, "pp-kmod-gone", 1);
	REQUIRE(pp_test_sh("rm -r '%s/module/pp_kmod'", f.sys) == 0);
	CHECK(open_module(&f, &img, why, sizeof(why)) == -ENOENT);
	/* installed compressed, as trixie's kernels are: its code is not read */
	fixture_init(&f, "pp-kmod-xz", 1);
	REQUIRE(pp_test_sh("sed -i 's/pp_kmod.ko:/pp_kmod.ko.xz:/' '%s/lib/modules/" RELEASE
			   "/modules.dep'",
			   f.root) == 0);
	CHECK(open_module(&f, &img, why, sizeof(why)) == -EOPNOTSUPP);
	CHECK(strstr(why, "compressed") != NULL);
	/* an unstripped module has its DWARF itself: no debug file is needed */
	fixture_init(&f, "pp-kmod-whole", 0);
	REQUIRE(pp_test_sh("cp " MODULE " '%s/lib/modules/" RELEASE
			   "/kernel/drivers/pp/pp_kmod.ko'",
			   f.root) == 0);
	REQUIRE(open_module(&f, &img, why, sizeof(why)) == 0);
	CHECK(img.dwarf == img.code);
	pp_kmod_image_fini(&img);
}

/*
 * Without CAP_SYSLOG the kernel shows every section at 0; kallsyms (through BPF) still names
 * the module's functions where they are, so the section holding the sampled function is
 * placed from it: the fields its code accesses through pointers are named all the same.
 */
TEST(a_module_whose_addresses_are_hidden_is_placed_by_its_symbol)
{
	struct fixture f;
	struct pp_kmod_image img;
	struct pp_data_type_resolver *r;
	struct pp_data_type t;
	struct pp_kernel_image_opts o = {.release = RELEASE};
	struct pp_kmod_anchor anchor = {"task_wakeups", TEXT_ADDR + func_offset("task_wakeups")};
	char why[1024], section[64];
	uint64_t value = 0, size = 0;
	size_t len;
	uint8_t *raw = read_file(MODULE, &len);

	CHECK(pp_kmod_symbol_section(raw, len, "task_wakeups", section, sizeof(section), &value,
				     &size) == 0);
	CHECK_STR(section, ".text");
	CHECK(value == func_offset("task_wakeups") && size > value);
	CHECK(pp_kmod_symbol_section(raw, len, "no_such_function", section, sizeof(section), &value,
				     &size) == -ENOENT);
	CHECK(pp_kmod_symbol_section(raw, 10, "task_wakeups", section, sizeof(section), &value,
				     &size) == -ENOEXEC);
	free(raw);

	fixture_init(&f, "pp-kmod-anchored", 1);
	REQUIRE(pp_test_kmod_sections(f.sys, live_files, NLIVE, 1) == 0);
	o.root = f.root;
	o.sys_root = f.sys;
	REQUIRE(pp_kmod_image_open(&o, "pp_kmod", &anchor, 64u << 20, &img, why, sizeof(why)) == 0);
	CHECK(img.anchored && img.text_addr == TEXT_ADDR);
	CHECK(img.anchored_lo == TEXT_ADDR && img.anchored_hi > anchor.addr);
	r = pp_data_type_resolver_open_mem(img.code, img.code_len, img.dwarf, img.dwarf_len, NULL);
	REQUIRE(r != NULL);
	CHECK(resolve(r, "task_prio", &t) == PP_DT_RESOLVED);
	CHECK_STR(t.field, "prio");
	CHECK(resolve(r, "task_wakeups", &t) == PP_DT_RESOLVED);
	CHECK_STR(t.field, "rq.nr_wakeups");
	pp_data_type_resolver_free(r);
	pp_kmod_image_fini(&img);
	/* a symbol the module's file does not have places nothing, and says so */
	anchor.symbol = "no_such_function";
	CHECK(pp_kmod_image_open(&o, "pp_kmod", &anchor, 64u << 20, &img, why, sizeof(why)) ==
	      -ENOENT);
	CHECK(strstr(why, "no_such_function") != NULL);
}

TEST_LIST = {
    {"a_module_laid_out_at_the_kernels_addresses_names_its_fields",
     a_module_laid_out_at_the_kernels_addresses_names_its_fields},
    {"files_that_are_no_module_or_lie_are_refused", files_that_are_no_module_or_lie_are_refused},
    {"modules_dep_names_the_file_as_modprobe_matches_it",
     modules_dep_names_the_file_as_modprobe_matches_it},
    {"a_loaded_module_is_found_with_its_debug_file_and_laid_out",
     a_loaded_module_is_found_with_its_debug_file_and_laid_out},
    {"a_module_not_found_whole_or_of_another_build_is_said_why",
     a_module_not_found_whole_or_of_another_build_is_said_why},
    {"a_module_whose_addresses_are_hidden_is_placed_by_its_symbol",
     a_module_whose_addresses_are_hidden_is_placed_by_its_symbol},
};

TEST_MAIN()
