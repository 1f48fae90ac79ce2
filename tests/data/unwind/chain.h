/*
 * Test programs for stack unwinding: a known call chain of 28 frames built at -O2 without
 * frame pointers, crossing two shared libraries, one of them built with frame pointers. At its
 * leaf, pp_capture either dumps its registers and stack (PP_CHAIN_DUMP=path: for the unwinder's
 * tests; PP_CHAIN_HOLD=seconds: then stays there) or spins (PP_CHAIN_SPIN=seconds: for profilers
 * to sample).
 */
#ifndef PP_TEST_CHAIN_H
#define PP_TEST_CHAIN_H

#include <stdint.h>

/* The dump's header, followed by len bytes of stack from rsp, then /proc/self/maps. */
struct pp_chain_dump {
	uint64_t rip, rsp, rbp;
	uint64_t len;	   /* stack bytes that follow */
	uint64_t maps_len; /* bytes of /proc/self/maps after them */
};

int pp_lib_00(int x);			      /* libpp_chain.so: the way in */
int pp_fp_outer(int x, int (*callback)(int)); /* libpp_chain_fp.so */

#endif
