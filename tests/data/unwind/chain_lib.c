/* libpp_chain.so: eight frames down to the frame-pointer library, six more from its callback
 * to the leaf, which dumps or spins (see chain.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"

#define NOINLINE __attribute__((noinline, used))
/* Work after the call keeps it a call, not a jump; the array gives each frame a size. */
#define STEP(name, next)                                                                           \
	NOINLINE int name(int x)                                                                   \
	{                                                                                          \
		volatile char pad[40];                                                             \
		pad[x & 31] = (char)x;                                                             \
		return next(x + 1) + pad[x & 31];                                                  \
	}

static uint64_t stack_top(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uint64_t lo, hi, top = 0;

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			top = hi;
	if (f)
		fclose(f);
	return top;
}

static char g_stack[1 << 20];
static char g_maps[1 << 16];
static uint64_t g_top;

NOINLINE int pp_chain_dump(uint64_t rip, uint64_t rsp, uint64_t rbp)
{
	const char *path = getenv("PP_CHAIN_DUMP");
	struct pp_chain_dump d = {.rip = rip, .rsp = rsp, .rbp = rbp};
	FILE *f, *m;

	/* the stack above rsp is the caller's and up: nothing here writes there */
	if (!path || !g_top || g_top <= rsp || g_top - rsp > sizeof(g_stack))
		return 1;
	d.len = g_top - rsp;
	memcpy(g_stack, (const void *)(uintptr_t)rsp, d.len);
	m = fopen("/proc/self/maps", "r");
	if (m) {
		d.maps_len = fread(g_maps, 1, sizeof(g_maps), m);
		fclose(m);
	}
	f = fopen(path, "wb");
	if (!f)
		return 1;
	fwrite(&d, sizeof(d), 1, f);
	fwrite(g_stack, 1, d.len, f);
	fwrite(g_maps, 1, d.maps_len, f);
	if (fclose(f))
		return 1;
	/* PP_CHAIN_HOLD=seconds: stays at the leaf that long, for tests that read its /proc */
	if (getenv("PP_CHAIN_HOLD"))
		sleep((unsigned)atoi(getenv("PP_CHAIN_HOLD")));
	return 0;
}

/* Spins for SECONDS of the process's CPU time, not wall time: what a check counts is samples,
 * and on a busy machine a wall-time spin gets a fraction of the CPU it was meant to have. */
NOINLINE int pp_spin(double seconds)
{
	struct timespec t0, t;
	volatile unsigned long acc = 0;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			acc += (unsigned long)i * 2654435761u;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	return (int)(acc & 1);
}

NOINLINE int pp_capture(int x)
{
	const char *spin = getenv("PP_CHAIN_SPIN");
	uint64_t rip, rsp, rbp;

	if (spin)
		return pp_spin(atof(spin)) + x;
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(rip), "=r"(rsp), "=r"(rbp));
	return pp_chain_dump(rip, rsp, rbp) + x;
}

/* a frame whose CFA is rbp-based even without frame pointers: a variable-length array */
NOINLINE int pp_cb_05(int x)
{
	volatile char vla[16 + (x & 15)];

	vla[0] = (char)x;
	return pp_capture(x + 1) + vla[0];
}
STEP(pp_cb_04, pp_cb_05)
STEP(pp_cb_03, pp_cb_04)
STEP(pp_cb_02, pp_cb_03)
STEP(pp_cb_01, pp_cb_02)
STEP(pp_cb_00, pp_cb_01)
STEP(pp_lib_cb, pp_cb_00)

NOINLINE int pp_lib_07(int x)
{
	volatile char pad[24];

	pad[x & 15] = (char)x;
	return pp_fp_outer(x + 1, pp_lib_cb) + pad[x & 15];
}
STEP(pp_lib_06, pp_lib_07)
STEP(pp_lib_05, pp_lib_06)
STEP(pp_lib_04, pp_lib_05)
STEP(pp_lib_03, pp_lib_04)
STEP(pp_lib_02, pp_lib_03)
STEP(pp_lib_01, pp_lib_02)

int pp_lib_00(int x)
{
	volatile char pad[40];

	if (!g_top)
		g_top = stack_top();
	pad[x & 31] = (char)x;
	return pp_lib_01(x + 1) + pad[x & 31];
}
