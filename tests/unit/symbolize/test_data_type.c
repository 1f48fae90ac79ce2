/*
 * Tests of data_type.c on a real binary: tests/programs/data_access, built -O2 -g. Each of its
 * accessor functions makes one field access, named here from its source; the resolver must
 * name the same type and field at the instruction's real address. The member offsets are
 * checked against what readelf (binutils, an independent DWARF reader) dumps.
 */
#define _GNU_SOURCE /* memfd_create */
#include <capstone/capstone.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "elf_symbol.h"
#include "symbolize/data_type.h"

#define FIXTURE PP_TEST_BUILD_DIR "/pp_data_access"

/* Copies len bytes of the code section at addr; 0, or -1 when no section holds them all. */
static int code_at(int fd, uint64_t addr, uint8_t *buf, size_t len)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	int ret = -1;

	while (elf && ret && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS && addr >= sh.sh_addr &&
		    addr + len <= sh.sh_addr + sh.sh_size && (data = elf_getdata(scn, NULL))) {
			memcpy(buf, (uint8_t *)data->d_buf + (addr - sh.sh_addr), len);
			ret = 0;
		}
	}
	elf_end(elf);
	return ret;
}

/* The function's instruction addresses, decoded from the file's bytes; returns how many. */
static size_t instructions(int fd, uint64_t addr, uint64_t size, uint64_t *out, size_t max)
{
	uint8_t *code = malloc(size);
	size_t n = 0;
	cs_insn *insn;
	csh cs;

	if (code && code_at(fd, addr, code, size) == 0 &&
	    cs_open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK) {
		size_t count = cs_disasm(cs, code, size, addr, 0, &insn);

		for (size_t i = 0; i < count && n < max; i++)
			out[n++] = insn[i].address;
		if (count)
			cs_free(insn, count);
		cs_close(&cs);
	}
	free(code);
	return n;
}

/* The first access in the function that resolves, or the last reason none did. */
static enum pp_data_type_miss resolve_in(struct pp_data_type_resolver *r, int fd, const char *func,
					 uint64_t data_addr, struct pp_data_type *out)
{
	uint64_t size = 0, addr = pp_test_elf_symbol(fd, func, &size), pcs[64];
	size_t n = addr ? instructions(fd, addr, size, pcs, 64) : 0;
	enum pp_data_type_miss last = PP_DT_NO_CODE;

	for (size_t i = 0; i < n; i++) {
		last = pp_data_type_resolve(r, pcs[i], data_addr, out);
		if (last == PP_DT_RESOLVED)
			return last;
		if (last != PP_DT_NO_MEM_OPERAND)
			break;
	}
	if (last != PP_DT_RESOLVED)
		fprintf(stderr, "  %s: %s\n", func, pp_data_type_miss_name(last));
	return last;
}

/* The member's offset as readelf dumps it (the first member of that name), -1 if not found. */
static long readelf_member_offset(const char *member)
{
	char line[512], want[128];
	FILE *p = popen("readelf --debug-dump=info " FIXTURE " 2>/dev/null", "r");
	int in_member = 0;
	long off = -1;

	if (!p)
		return -1;
	snprintf(want, sizeof(want), ": %s\n", member);
	while (off < 0 && fgets(line, sizeof(line), p)) {
		if (strstr(line, "Abbrev Number"))
			in_member = strstr(line, "(DW_TAG_member)") ? 1 : 0;
		else if (in_member == 1 && strstr(line, "DW_AT_name") && strstr(line, want))
			in_member = 2;
		else if (in_member == 2 && strstr(line, "DW_AT_data_member_location"))
			off = strtol(strrchr(line, ':') + 1, NULL, 0);
	}
	pclose(p);
	return off;
}

static struct pp_data_type_resolver *open_fixture(int *fd)
{
	*fd = open(FIXTURE, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	elf_version(EV_CURRENT);
	return pp_data_type_resolver_new(*fd, *fd);
}

TEST(pointer_in_a_register_names_type_and_field)
{
	struct pp_data_type t;
	int fd;
	struct pp_data_type_resolver *r = open_fixture(&fd);
	char leaf[256];

	REQUIRE(r != NULL);
	CHECK(readelf_member_offset("rx_bytes") == 16);
	REQUIRE(resolve_in(r, fd, "read_rx", 0, &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct conn");
	CHECK_STR(t.field, "rx_bytes");
	CHECK(t.offset == 16 && t.size == 8 && !t.is_store);
	pp_data_type_format(&t, leaf, sizeof(leaf));
	CHECK_STR(leaf, "struct conn.rx_bytes");

	CHECK(readelf_member_offset("tx_bytes") == 24);
	REQUIRE(resolve_in(r, fd, "write_tx", 0, &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct conn");
	CHECK_STR(t.field, "tx_bytes");
	CHECK(t.offset == 24 && t.is_store);
	pp_data_type_resolver_free(r);
	close(fd);
}

TEST(nested_structs_and_arrays_of_structs)
{
	struct pp_data_type t;
	int fd;
	struct pp_data_type_resolver *r = open_fixture(&fd);

	REQUIRE(r != NULL);
	/* conn.hdr at 4, header.len at 2 */
	CHECK(readelf_member_offset("hdr") == 4 && readelf_member_offset("len") == 2);
	REQUIRE(resolve_in(r, fd, "read_hdr_len", 0, &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct conn");
	CHECK_STR(t.field, "hdr.len");
	CHECK(t.offset == 6 && t.size == 2);
	/* conn.slots at 48, slot.value at 8: any slot's value is displacement 56 */
	CHECK(readelf_member_offset("slots") == 48 && readelf_member_offset("value") == 8);
	REQUIRE(resolve_in(r, fd, "read_slot_value", 0, &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct conn");
	CHECK_STR(t.field, "slots[].value");
	pp_data_type_resolver_free(r);
	close(fd);
}

TEST(globals_by_rip_relative_operand_and_by_data_address)
{
	struct pp_data_type t;
	uint64_t size = 0, table;
	int fd;
	struct pp_data_type_resolver *r = open_fixture(&fd);

	REQUIRE(r != NULL);
	/* g_stats.misses++: the address is in the instruction */
	CHECK(readelf_member_offset("misses") == 8);
	REQUIRE(resolve_in(r, fd, "count_miss", 0, &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct stats");
	CHECK_STR(t.field, "misses");
	/* g_table[i].tx_bytes through a computed base: only the data address names it */
	table = pp_test_elf_symbol(fd, "g_table", &size);
	REQUIRE(table != 0 && size == 8 * 112);
	CHECK(resolve_in(r, fd, "read_table_tx", 0, &t) == PP_DT_NO_VARIABLE);
	REQUIRE(resolve_in(r, fd, "read_table_tx", table + 3 * 112 + 24, &t) == PP_DT_RESOLVED);
	CHECK_STR(t.type, "struct conn");
	CHECK_STR(t.field, "tx_bytes");
	CHECK(t.offset == 24);
	/* an address past every global names nothing */
	CHECK(resolve_in(r, fd, "read_table_tx", table + size + (1 << 20), &t) ==
	      PP_DT_NO_VARIABLE);
	pp_data_type_resolver_free(r);
	close(fd);
}

TEST(what_cannot_be_resolved_says_why)
{
	struct pp_data_type t;
	uint64_t size = 0, ret_func;
	uint64_t pcs[8];
	size_t n;
	int fd;
	struct pp_data_type_resolver *r = open_fixture(&fd);
	char leaf[256];

	REQUIRE(r != NULL);
	CHECK(pp_data_type_resolve(r, 0x10, 0, &t) == PP_DT_NO_CODE);
	/* read_rx ends with its ret: no memory operand */
	ret_func = pp_test_elf_symbol(fd, "read_rx", &size);
	n = instructions(fd, ret_func, size, pcs, 8);
	REQUIRE(n >= 2);
	CHECK(pp_data_type_resolve(r, pcs[n - 1], 0, &t) == PP_DT_NO_MEM_OPERAND);
	CHECK_STR(pp_data_type_miss_name(PP_DT_STACK_SLOT), "stack_slot");
	CHECK_STR(pp_data_type_miss_name((enum pp_data_type_miss)99), "unknown");
	/* an offset in no field is shown as the type and the offset */
	memset(&t, 0, sizeof(t));
	snprintf(t.type, sizeof(t.type), "struct conn");
	t.offset = 13;
	pp_data_type_format(&t, leaf, sizeof(leaf));
	CHECK_STR(leaf, "struct conn +13");
	pp_data_type_resolver_free(r);
	close(fd);
	/* a file that is no ELF */
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	CHECK(pp_data_type_resolver_new(fd, fd) == NULL);
	close(fd);
}

/* The fixture's bytes with its .debug_info section header changed by patch; a memfd. */
static int patched_fixture(void (*patch)(uint8_t *image, size_t len, Elf64_Shdr *sh))
{
	int fd = open(FIXTURE, O_RDONLY | O_CLOEXEC), out = -1;
	off_t len = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
	uint8_t *image = len > 0 ? malloc((size_t)len) : NULL;
	Elf64_Ehdr eh;

	if (!image || pread(fd, image, (size_t)len, 0) != len)
		goto done;
	memcpy(&eh, image, sizeof(eh));
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh, strtab;
		uint8_t *at = image + eh.e_shoff + (size_t)i * sizeof(sh);

		memcpy(&sh, at, sizeof(sh));
		memcpy(&strtab, image + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof(sh),
		       sizeof(strtab));
		if (strcmp((const char *)image + strtab.sh_offset + sh.sh_name, ".debug_info"))
			continue;
		patch(image, (size_t)len, &sh);
		memcpy(at, &sh, sizeof(sh));
		out = memfd_create("patched", MFD_CLOEXEC);
		if (out >= 0 && write(out, image, (size_t)len) != len) {
			close(out);
			out = -1;
		}
		break;
	}
done:
	free(image);
	if (fd >= 0)
		close(fd);
	return out;
}

static void claim_past_the_end(uint8_t *image, size_t len, Elf64_Shdr *sh)
{
	(void)image;
	sh->sh_size = len + (1ull << 30);
}

static void claim_a_compression_bomb(uint8_t *image, size_t len, Elf64_Shdr *sh)
{
	Elf64_Chdr c = {.ch_type = ELFCOMPRESS_ZLIB, .ch_size = 4ull << 30, .ch_addralign = 1};

	(void)len;
	sh->sh_flags |= SHF_COMPRESSED;
	memcpy(image + sh->sh_offset, &c, sizeof(c));
}

/* A debug section another user's file claims is refused before libdw reads or inflates it. */
TEST(hostile_claims_are_refused_before_libdw_reads_them)
{
	int fd = patched_fixture(claim_past_the_end);

	REQUIRE(fd >= 0);
	errno = 0;
	CHECK(pp_data_type_resolver_new(fd, fd) == NULL && errno == EINVAL);
	close(fd);
	fd = patched_fixture(claim_a_compression_bomb);
	REQUIRE(fd >= 0);
	errno = 0;
	CHECK(pp_data_type_resolver_new(fd, fd) == NULL && errno == EFBIG);
	close(fd);
}

/* Whether some access in the function resolves to type.field, a store or a load. */
static int accesses(struct pp_data_type_resolver *r, int fd, const char *func, const char *type,
		    const char *field, int is_store)
{
	uint64_t size = 0, addr = pp_test_elf_symbol(fd, func, &size), pcs[64];
	size_t n = addr ? instructions(fd, addr, size, pcs, 64) : 0;

	for (size_t i = 0; i < n; i++) {
		struct pp_data_type t;

		if (pp_data_type_resolve(r, pcs[i], 0, &t) == PP_DT_RESOLVED &&
		    !strcmp(t.type, type) && !strcmp(t.field, field) && t.is_store == is_store)
			return 1;
	}
	return 0;
}

/*
 * Readelf's view of a frame, to check stack slots independently of libdw and of cfi/: the
 * frame base of the subprogram holding a variable and the variable's DW_OP_fbreg offset
 * (--debug-dump=info), and the CFA rule at a pc (--debug-dump=frames-interp).
 */
struct readelf_frame {
	int base_is_cfa; /* DW_OP_call_frame_cfa (gcc); else DW_OP_reg6, rbp (clang) */
	long fbreg;	 /* the variable's offset from the frame base */
};

/* One DIE of readelf's dump, as its attribute lines go by (gcc and clang order them apart). */
struct readelf_die {
	int tag;	/* 1: DW_TAG_subprogram, 2: DW_TAG_variable, 0: another */
	int named;	/* DW_AT_name is the one looked for */
	int frame_base; /* -1: none, 1: DW_OP_call_frame_cfa, 0: another */
	int has_fbreg;
	long fbreg;
};

static int readelf_local(const char *func, const char *var, struct readelf_frame *out)
{
	char line[512], want_func[128], want_var[128];
	FILE *p = popen("readelf --debug-dump=info " FIXTURE " 2>/dev/null", "r");
	struct readelf_die die = {0};
	int in_func = 0, found = 0, base = -1, more = 1;

	if (!p)
		return -1;
	snprintf(want_func, sizeof(want_func), ": %s\n", func);
	snprintf(want_var, sizeof(want_var), ": %s\n", var);
	while (!found && more) {
		const char *op;

		more = fgets(line, sizeof(line), p) != NULL;
		if (!more || strstr(line, "Abbrev Number")) { /* the previous DIE is complete */
			if (die.tag == 1 && in_func)
				break; /* the next function: var is not in func */
			if (die.tag == 1 && die.named) {
				in_func = 1;
				base = die.frame_base;
			}
			if (die.tag == 2 && in_func && die.named && die.has_fbreg) {
				out->fbreg = die.fbreg;
				found = 1;
			}
			memset(&die, 0, sizeof(die));
			die.frame_base = -1;
			die.tag = strstr(line, "(DW_TAG_subprogram)") ? 1
				  : strstr(line, "(DW_TAG_variable)") ? 2
								      : 0;
		} else if (strstr(line, "DW_AT_name")) {
			die.named = strstr(line, die.tag == 1 ? want_func : want_var) != NULL;
		} else if (strstr(line, "DW_AT_frame_base")) {
			die.frame_base = strstr(line, "DW_OP_call_frame_cfa") ? 1 : 0;
		} else if (strstr(line, "DW_AT_location") && (op = strstr(line, "DW_OP_fbreg: "))) {
			die.fbreg = strtol(op + strlen("DW_OP_fbreg: "), NULL, 10);
			die.has_fbreg = 1;
		}
	}
	pclose(p);
	out->base_is_cfa = base == 1;
	return found && base >= 0 ? 0 : -1;
}

/* The CFA at pc as readelf interprets the FDE covering it: "rsp" or "rbp", and the offset. */
static int readelf_cfa_at(uint64_t pc, char reg[8], long *off)
{
	char line[512];
	FILE *p = popen("readelf --debug-dump=frames-interp " FIXTURE " 2>/dev/null", "r");
	unsigned long lo, hi, loc;
	int in_fde = 0, found = 0;

	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		const char *range = strstr(line, "FDE ");
		char cfa[32];

		if (range && (range = strstr(range, "pc=")) &&
		    sscanf(range, "pc=%lx..%lx", &lo, &hi) == 2) {
			in_fde = pc >= lo && pc < hi;
			continue;
		}
		if (in_fde && sscanf(line, "%lx %31s", &loc, cfa) == 2 && loc <= pc &&
		    sscanf(cfa, "%3[a-z]%ld", reg, off) == 2)
			found = 1; /* the last row at or below pc wins */
	}
	pclose(p);
	return found ? 0 : -1;
}

/*
 * A struct in the frame (its address escapes), located by DW_OP_fbreg from the subprogram's
 * frame base: clang's is rbp, which the accesses use; gcc's is the CFA, which the binary's
 * .eh_frame gives at each pc (rsp + 128 in the function's body) while the accesses use rsp.
 * Every access the resolver names must land where readelf's frame says: the operand's
 * displacement, less the CFA's offset from its register (for gcc), less the variable's
 * DW_OP_fbreg offset, is the offset into the struct. The fixture is built by the compiler
 * that builds this test: CI covers gcc (the main build) and clang (the sanitizer build).
 */
TEST(stack_slots_by_the_frame)
{
	uint64_t size = 0, addr, pcs[64];
	struct readelf_frame frame = {0};
	size_t n, resolved = 0;
	csh cs;
	int fd;
	struct pp_data_type_resolver *r = open_fixture(&fd);

	REQUIRE(r != NULL);
	REQUIRE(readelf_local("stack_conn", "c", &frame) == 0);
	addr = pp_test_elf_symbol(fd, "stack_conn", &size);
	n = addr ? instructions(fd, addr, size, pcs, 64) : 0;
	REQUIRE(n > 0 && cs_open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK);
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	for (size_t i = 0; i < n; i++) {
		uint8_t code[15]; /* the longest x86 instruction */
		struct pp_data_type t;
		size_t len =
		    addr + size - pcs[i] < sizeof(code) ? addr + size - pcs[i] : sizeof(code);
		cs_insn *insn;
		long expect;

		if (pp_data_type_resolve(r, pcs[i], 0, &t) != PP_DT_RESOLVED)
			continue;
		REQUIRE(code_at(fd, pcs[i], code, len) == 0);
		REQUIRE(cs_disasm(cs, code, len, pcs[i], 1, &insn) == 1);
		for (uint8_t k = 0; k < insn->detail->x86.op_count; k++) {
			const cs_x86_op *op = &insn->detail->x86.operands[k];
			char reg[8] = "";
			long cfa_off = 0;

			if (op->type != X86_OP_MEM)
				continue;
			if (frame.base_is_cfa) {
				REQUIRE(readelf_cfa_at(pcs[i], reg, &cfa_off) == 0);
				CHECK(strcmp(reg, cs_reg_name(cs, op->mem.base)) == 0);
			}
			expect = (long)op->mem.disp - cfa_off - frame.fbreg;
			CHECK(strcmp(t.type, "struct conn") == 0);
			CHECK(t.offset == expect);
			if (t.field[0] && !strchr(t.field, '.') && !strchr(t.field, '['))
				CHECK(readelf_member_offset(t.field) == expect);
			resolved++;
		}
		cs_free(insn, 1);
	}
	cs_close(&cs);
	CHECK(resolved >= 2);
	CHECK(accesses(r, fd, "stack_conn", "struct conn", "tx_bytes", 1));
	CHECK(accesses(r, fd, "stack_conn", "struct conn", "rx_bytes", 0));
	pp_data_type_resolver_free(r);
	close(fd);
}

TEST_LIST = {
    {"stack_slots_by_the_frame", stack_slots_by_the_frame},
    {"hostile_claims_are_refused_before_libdw_reads_them",
     hostile_claims_are_refused_before_libdw_reads_them},
    {"pointer_in_a_register_names_type_and_field", pointer_in_a_register_names_type_and_field},
    {"nested_structs_and_arrays_of_structs", nested_structs_and_arrays_of_structs},
    {"globals_by_rip_relative_operand_and_by_data_address",
     globals_by_rip_relative_operand_and_by_data_address},
    {"what_cannot_be_resolved_says_why", what_cannot_be_resolved_says_why},
};
TEST_MAIN()
