/*
 * The hostile neighbour's files, for tests and benchmarks: small ELF files whose code a process
 * really runs (so the agent samples it and reads the file), some with headers that claim what
 * the file does not hold.
 *
 *   pp_hostile_elf write KIND PATH [NAME]
 *     plain           a whole file: .text holds a spin loop named NAME (pp_hostile_spin)
 *     sparse-symtab   .symtab claims 2 GiB at 4 GiB of an 8 GiB sparse file (12 KiB on disk)
 *     sparse-strtab   .strtab likewise
 *     sparse-ehframe  .eh_frame likewise (with an .eh_frame_hdr)
 *     many-sections   e_shnum's extended count claims 100 million sections
 *     huge-symtab:N   a real .symtab of N function entries (N * 24 bytes on disk)
 *   pp_hostile_elf run SECONDS PATH...
 *     maps each file's .text and runs it in turn until SECONDS pass; prints "ready PID" once
 *     every file is mapped.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TEXT_OFF 0x1000u
#define PAGE 0x1000u
#define GIB (1ull << 30)

enum section { S_NULL, S_TEXT, S_NOTE, S_SYMTAB, S_STRTAB, S_SHSTRTAB, S_EH_HDR, S_EH, S_COUNT };

static const char shstrtab[] = "\0.text\0.note.gnu.build-id\0.symtab\0.strtab\0.shstrtab\0"
			       ".eh_frame_hdr\0.eh_frame";

static uint32_t name_of(const char *n)
{
	for (uint32_t i = 1; i < sizeof(shstrtab); i += (uint32_t)strlen(shstrtab + i) + 1)
		if (strcmp(shstrtab + i, n) == 0)
			return i;
	return 0;
}

/* mov rax, 200000; 1: dec rax; jnz 1b; ret */
static const uint8_t spin[] = {0x48, 0xb8, 0x40, 0x0d, 0x03, 0x00, 0x00, 0x00,
			       0x00, 0x00, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));

		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* A build id derived from the file's name and contents' kind: distinct per file. */
static void build_id(uint8_t id[20], const char *path, const char *kind, const char *name)
{
	uint64_t h = 1469598103934665603ull;
	const char *parts[3] = {path, kind, name};

	for (int p = 0; p < 3; p++)
		for (const char *c = parts[p]; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
	for (int i = 0; i < 20; i++) {
		h = (h ^ (uint64_t)i) * 1099511628211ull;
		id[i] = (uint8_t)(h >> 32);
	}
}

static int write_elf(const char *kind, const char *path, const char *name)
{
	Elf64_Shdr sh[S_COUNT] = {0};
	Elf64_Ehdr eh = {0};
	Elf64_Phdr ph[2] = {0};
	uint8_t note[36] = {4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0};
	uint64_t nsyms = 1, file_size = 0, symoff = 0x2000, stroff, shoff, eh_off, hdr_off;
	int sparse = 0, ehframe = 0, fd;
	char *strtab;
	size_t namelen = strlen(name), strsize;

	if (!strncmp(kind, "huge-symtab:", 12)) {
		nsyms = strtoull(kind + 12, NULL, 10);
		if (nsyms == 0 || nsyms > 50000000)
			return -EINVAL;
	} else if (!strcmp(kind, "sparse-symtab") || !strcmp(kind, "sparse-strtab")) {
		sparse = 1;
	} else if (!strcmp(kind, "sparse-ehframe")) {
		sparse = ehframe = 1;
	} else if (strcmp(kind, "plain") && strcmp(kind, "many-sections")) {
		return -EINVAL;
	}
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (fd < 0)
		return -errno;
	/* names: "\0NAME\0" then, for huge tables, "NAME_%09llu\0" each */
	strsize = 1 + namelen + 1 + (nsyms > 1 ? (nsyms - 1) * (namelen + 11) : 0);
	strtab = calloc(1, strsize);
	if (!strtab) {
		close(fd);
		return -ENOMEM;
	}
	memcpy(strtab + 1, name, namelen);
	stroff = symoff + (nsyms + 1) * sizeof(Elf64_Sym);
	hdr_off = (stroff + strsize + 15) & ~15ull;
	eh_off = hdr_off + 16;
	shoff = (eh_off + 32 + 63) & ~63ull;

	build_id(note + 16, path, kind, name);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = shoff;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 2;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = ehframe ? S_COUNT : S_EH_HDR;
	eh.e_shstrndx = S_SHSTRTAB;
	ph[0] = (Elf64_Phdr){.p_type = PT_LOAD,
			     .p_flags = PF_R | PF_X,
			     .p_filesz = TEXT_OFF + PAGE,
			     .p_memsz = TEXT_OFF + PAGE,
			     .p_align = PAGE};
	ph[1] = (Elf64_Phdr){.p_type = PT_NOTE,
			     .p_flags = PF_R,
			     .p_offset = 0x200,
			     .p_vaddr = 0x200,
			     .p_filesz = sizeof(note),
			     .p_memsz = sizeof(note),
			     .p_align = 4};
	sh[S_TEXT] = (Elf64_Shdr){.sh_name = name_of(".text"),
				  .sh_type = SHT_PROGBITS,
				  .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
				  .sh_addr = TEXT_OFF,
				  .sh_offset = TEXT_OFF,
				  .sh_size = PAGE,
				  .sh_addralign = 16};
	sh[S_NOTE] = (Elf64_Shdr){.sh_name = name_of(".note.gnu.build-id"),
				  .sh_type = SHT_NOTE,
				  .sh_flags = SHF_ALLOC,
				  .sh_addr = 0x200,
				  .sh_offset = 0x200,
				  .sh_size = sizeof(note),
				  .sh_addralign = 4};
	sh[S_SYMTAB] = (Elf64_Shdr){.sh_name = name_of(".symtab"),
				    .sh_type = SHT_SYMTAB,
				    .sh_offset = symoff,
				    .sh_size = (nsyms + 1) * sizeof(Elf64_Sym),
				    .sh_link = S_STRTAB,
				    .sh_info = 1,
				    .sh_addralign = 8,
				    .sh_entsize = sizeof(Elf64_Sym)};
	sh[S_STRTAB] = (Elf64_Shdr){.sh_name = name_of(".strtab"),
				    .sh_type = SHT_STRTAB,
				    .sh_offset = stroff,
				    .sh_size = strsize,
				    .sh_addralign = 1};
	sh[S_SHSTRTAB] = (Elf64_Shdr){.sh_name = name_of(".shstrtab"),
				      .sh_type = SHT_STRTAB,
				      .sh_offset = 0x300,
				      .sh_size = sizeof(shstrtab),
				      .sh_addralign = 1};
	sh[S_EH_HDR] = (Elf64_Shdr){.sh_name = name_of(".eh_frame_hdr"),
				    .sh_type = SHT_PROGBITS,
				    .sh_flags = SHF_ALLOC,
				    .sh_addr = hdr_off,
				    .sh_offset = hdr_off,
				    .sh_size = 12,
				    .sh_addralign = 4};
	sh[S_EH] = (Elf64_Shdr){.sh_name = name_of(".eh_frame"),
				.sh_type = SHT_PROGBITS,
				.sh_flags = SHF_ALLOC,
				.sh_addr = eh_off,
				.sh_offset = eh_off,
				.sh_size = 32,
				.sh_addralign = 8};
	if (sparse) {
		enum section claim = !strcmp(kind, "sparse-symtab")   ? S_SYMTAB
				     : !strcmp(kind, "sparse-strtab") ? S_STRTAB
								      : S_EH;

		sh[claim].sh_offset = 4 * GIB;
		sh[claim].sh_size = 2 * GIB;
		file_size = 8 * GIB;
	}
	if (!strcmp(kind, "many-sections")) {
		eh.e_shnum = 0;
		sh[S_NULL].sh_size = 100000000; /* extended numbering: the count is here */
	}
	{
		uint8_t hdr[12] = {1, DW_EH_PE_pcrel | DW_EH_PE_sdata4, DW_EH_PE_udata4,
				   DW_EH_PE_datarel | DW_EH_PE_sdata4};
		int32_t rel = (int32_t)(eh_off - (hdr_off + 4));
		int ok = 1;

		memcpy(hdr + 4, &rel, 4);
		for (uint64_t i = 1; i < nsyms; i++) {
			char *p = strtab + 1 + namelen + 1 + (i - 1) * (namelen + 11);

			snprintf(p, namelen + 11, "%s_%09llu", name, (unsigned long long)i);
		}
		ok &= pwrite_all(fd, &eh, sizeof(eh), 0) == 0;
		ok &= pwrite_all(fd, ph, sizeof(ph), sizeof(eh)) == 0;
		ok &= pwrite_all(fd, note, sizeof(note), 0x200) == 0;
		ok &= pwrite_all(fd, shstrtab, sizeof(shstrtab), 0x300) == 0;
		ok &= pwrite_all(fd, spin, sizeof(spin), TEXT_OFF) == 0;
		for (uint64_t first = 1; first <= nsyms && ok; first += 65536) {
			static Elf64_Sym chunk[65536];
			uint64_t n = nsyms - first + 1 < 65536 ? nsyms - first + 1 : 65536;

			for (uint64_t k = 0; k < n; k++) {
				uint64_t i = first + k;

				chunk[k] = (Elf64_Sym){
				    .st_name = i == 1 ? 1u
						      : (uint32_t)(1 + namelen + 1 +
								   (i - 2) * (namelen + 11)),
				    .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
				    .st_shndx = S_TEXT,
				    .st_value =
					TEXT_OFF + (i == 1 ? 0 : 16 + (i - 2) % (PAGE - 16)),
				    .st_size = i == 1 ? sizeof(spin) : 1,
				};
			}
			ok &= pwrite_all(fd, chunk, n * sizeof(*chunk),
					 symoff + first * sizeof(*chunk)) == 0;
		}
		ok &= pwrite_all(fd, strtab, strsize, stroff) == 0;
		if (ehframe)
			ok &= pwrite_all(fd, hdr, sizeof(hdr), hdr_off) == 0;
		ok &= pwrite_all(fd, sh, sizeof(sh), shoff) == 0;
		if (ok && file_size)
			ok = ftruncate(fd, (off_t)file_size) == 0;
		free(strtab);
		close(fd);
		return ok ? 0 : -EIO;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(double seconds, int n, char **paths)
{
	void (*fn[64])(void);
	double until;

	if (n > 64)
		n = 64;
	for (int i = 0; i < n; i++) {
		int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
		void *p = fd >= 0
			      ? mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, TEXT_OFF)
			      : MAP_FAILED;

		if (p == MAP_FAILED) {
			fprintf(stderr, "pp_hostile_elf: cannot map %s: %s\n", paths[i],
				strerror(errno));
			return 1;
		}
		close(fd);
		fn[i] = (void (*)(void))p;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	until = now_s() + seconds;
	while (now_s() < until)
		for (int i = 0; i < n; i++)
			fn[i]();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "write")) {
		int err = write_elf(argv[2], argv[3], argc > 4 ? argv[4] : "pp_hostile_spin");

		if (err)
			fprintf(stderr, "pp_hostile_elf: cannot write %s %s: %s\n", argv[2],
				argv[3], strerror(-err));
		return err ? 1 : 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "run"))
		return run(atof(argv[2]), argc - 3, argv + 3);
	fprintf(stderr, "usage: pp_hostile_elf write KIND PATH [NAME] | run SECONDS PATH...\n");
	return 2;
}
