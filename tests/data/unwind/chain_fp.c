/* libpp_chain_fp.so: two frames built with frame pointers. The unwinder's tests also walk them
 * as a file without a table: frame-pointer steps here, tables again after it. */
#include "chain.h"

__attribute__((noinline)) static int pp_fp_inner(int x, int (*callback)(int))
{
	volatile int pad[8];

	pad[x & 7] = x;
	return callback(x + 1) + pad[x & 7];
}

__attribute__((noinline)) int pp_fp_outer(int x, int (*callback)(int))
{
	volatile int pad[8];

	pad[x & 7] = x;
	return pp_fp_inner(x + 1, callback) + pad[x & 7];
}
