/*
 * What naming the data type of an access costs per new PC (symbolize/data_type.h), against naming
 * the function of the same PC from the binary's .symtab (the peer, in the same run): every
 * instruction of the binary's code that accesses memory through an operand is resolved once.
 * Prints the resolver's open, a first pass (which builds its index of globals and functions) and
 * a second, the time per PC of the second and of the peer, their ratio, and how many PCs got a
 * type, by the reason the others did not. Used by bench/bench_data_type.sh.
 *
 * usage: pp_bench_data_type BINARY [DEBUG_FILE]
 * PP_BENCH_MAX_PCS=N: at most N of them, evenly spread (a vmlinux has millions).
 * PP_BENCH_MAPPED=1: the files mapped, as the agent reads the kernel's image.
 * Ends with the peak memory the resolver held: heap (RssAnon) and mapped file (RssFile).
 */
#include <capstone/capstone.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolize/data_type.h"
#include "symbolize/elf_symbols.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The addresses of the instructions with a memory operand (lea and nop excepted). */
static size_t memory_pcs(int fd, uint64_t **out)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	size_t n = 0, cap = 0;
	csh cs;

	if (!elf || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		const uint8_t *code;
		size_t size;
		uint64_t addr;
		cs_insn *insn = cs_malloc(cs);

		if (!insn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) || !(data = elf_getdata(scn, NULL))) {
			cs_free(insn, 1);
			continue;
		}
		code = data->d_buf;
		size = data->d_size;
		addr = sh.sh_addr;
		while (size) {
			if (!cs_disasm_iter(cs, &code, &size, &addr, insn)) {
				code++, size--, addr++; /* data in the code: step over a byte */
				continue;
			}
			for (uint8_t i = 0; i < insn->detail->x86.op_count; i++) {
				if (insn->detail->x86.operands[i].type != X86_OP_MEM ||
				    insn->id == X86_INS_LEA || insn->id == X86_INS_NOP)
					continue;
				if (n == cap) {
					uint64_t *grown = realloc(
					    *out, (cap = cap ? cap * 2 : 4096) * sizeof(**out));

					if (!grown)
						goto done;
					*out = grown;
				}
				(*out)[n++] = insn->address;
				break;
			}
		}
		cs_free(insn, 1);
	}
done:
	cs_close(&cs);
	elf_end(elf);
	return n;
}

/* A line of /proc/self/status, in kB. */
static void rss_kb(const char *key, unsigned long *kb)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	*kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			*kb = strtoul(line + strlen(key), NULL, 10);
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	unsigned long anon_kb, file_kb;
	unsigned long by_reason[PP_DT_MISS__COUNT] = {0};
	uint64_t *pcs = NULL, sym_start;
	double t0, t_open, t_first, t_types, t_syms;
	struct pp_data_type_resolver *r;
	struct pp_elf_symbols *syms;
	struct pp_data_type t;
	int fd, dfd;
	size_t n, named = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s BINARY [DEBUG_FILE]\n", argv[0]);
		return 2;
	}
	elf_version(EV_CURRENT);
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	dfd = argc > 2 ? open(argv[2], O_RDONLY | O_CLOEXEC) : fd;
	if (fd < 0 || dfd < 0) {
		perror("open");
		return 1;
	}
	n = memory_pcs(fd, &pcs);
	if (!n) {
		fprintf(stderr, "no memory-accessing instructions in %s\n", argv[1]);
		return 1;
	}
	if (getenv("PP_BENCH_MAX_PCS")) {
		size_t max = strtoull(getenv("PP_BENCH_MAX_PCS"), NULL, 10), all = n;

		if (max && n > max) {
			for (size_t i = 0; i < max; i++)
				pcs[i] = pcs[i * all / max];
			n = max;
			printf("%zu memory-accessing instructions, %zu of them evenly spread:\n",
			       all, n);
		}
	}
	t0 = now_s();
	r = pp_data_type_resolver_open(
	    fd, dfd,
	    &(struct pp_data_type_opts){.flags =
					    getenv("PP_BENCH_MAPPED") ? PP_DATA_TYPE_MAPPED : 0});
	t_open = now_s() - t0;
	if (!r) {
		perror("pp_data_type_resolver_new");
		return 1;
	}
	/* the first pass builds the index of globals and functions; the second finds it built */
	t0 = now_s();
	for (size_t i = 0; i < n; i++)
		pp_data_type_resolve(r, pcs[i], 0, &t);
	t_first = now_s() - t0;
	t0 = now_s();
	for (size_t i = 0; i < n; i++)
		by_reason[pp_data_type_resolve(r, pcs[i], 0, &t)]++;
	t_types = now_s() - t0;
	rss_kb("RssAnon:", &anon_kb);
	rss_kb("RssFile:", &file_kb);
	pp_data_type_resolver_free(r);

	syms = pp_elf_symbols_open_fd(fd);
	t0 = now_s();
	for (size_t i = 0; i < n; i++)
		named += pp_elf_symbols_lookup(syms, pcs[i], &sym_start) != NULL;
	t_syms = now_s() - t0;
	pp_elf_symbols_free(syms);

	printf("binary %s: %zu memory-accessing instructions\n", argv[1], n);
	printf(
	    "resolver open %.3f ms; first pass %.3f s (builds the index of globals and functions), "
	    "second "
	    "%.3f s\n",
	    t_open * 1e3, t_first, t_types);
	printf("data type per new PC: %.2f us; function name per PC (.symtab, peer): %.3f us "
	       "(%zu named); ratio %.0fx\n",
	       t_types / (double)n * 1e6, t_syms / (double)n * 1e6, named,
	       t_syms > 0 ? t_types / t_syms : 0.0);
	printf("typed: %lu of %zu (%.1f %%); not:", by_reason[PP_DT_RESOLVED], n,
	       100.0 * (double)by_reason[PP_DT_RESOLVED] / (double)n);
	for (int m = 1; m < PP_DT_MISS__COUNT; m++)
		if (by_reason[m])
			printf(" %s %lu", pp_data_type_miss_name((enum pp_data_type_miss)m),
			       by_reason[m]);
	printf("\n");
	printf("memory with the resolver after both passes: heap (RssAnon) %lu MiB, mapped "
	       "(RssFile) %lu MiB\n",
	       anon_kb >> 10, file_kb >> 10);
	free(pcs);
	close(fd);
	if (dfd != fd)
		close(dfd);
	return 0;
}
