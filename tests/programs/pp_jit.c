/*
 * A tiny JIT for the perf map tests: copies a counting loop's machine code (x86-64) into an
 * anonymous executable mapping, writes its name to /tmp/perf-PID.map as a runtime does, and
 * runs it for the given seconds. Modes for hostile maps: "link TARGET" makes the map a
 * symbolic link to TARGET, "fifo" makes it a FIFO nobody writes; "none" writes no map.
 *
 * usage: pp_jit SECONDS [normal|link TARGET|fifo|none] [PIDFILE]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mov rcx, 20000000; loop: dec rcx; jnz loop; ret */
static const unsigned char loop_code[] = {0x48, 0xb9, 0x00, 0x2d, 0x31, 0x01, 0x00, 0x00,
					  0x00, 0x00, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0, end;
	const char *mode = argc > 2 ? argv[2] : "normal";
	const char *pidfile = NULL;
	char map[64];
	unsigned char *code;
	void (*fn)(void);
	FILE *f;

#if !defined(__x86_64__)
	fprintf(stderr, "pp_jit: x86-64 only\n");
	return 77;
#endif
	if (strcmp(mode, "link") == 0)
		pidfile = argc > 4 ? argv[4] : NULL;
	else
		pidfile = argc > 3 ? argv[3] : NULL;
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	/* 64 bytes in, so the code does not start the mapping */
	memcpy(code + 64, loop_code, sizeof(loop_code));
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC))
		return 1;
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)getpid());
	unlink(map);
	if (strcmp(mode, "normal") == 0) {
		f = fopen(map, "w");
		if (!f)
			return 1;
		fprintf(f, "%lx %zx pp_jit_hot_loop\n", (unsigned long)(uintptr_t)(code + 64),
			sizeof(loop_code));
		fclose(f);
	} else if (strcmp(mode, "link") == 0 && argc > 3) {
		if (symlink(argv[3], map))
			return 1;
	} else if (strcmp(mode, "fifo") == 0) {
		if (mkfifo(map, 0600))
			return 1;
	}
	if (pidfile) {
		f = fopen(pidfile, "w");
		if (f) {
			fprintf(f, "%d\n%lx\n", (int)getpid(),
				(unsigned long)(uintptr_t)(code + 64));
			fclose(f);
		}
	}
	fn = (void (*)(void))(void *)(code + 64);
	end = now_s() + secs;
	while (now_s() < end)
		fn();
	unlink(map);
	return 0;
}
