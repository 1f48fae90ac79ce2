/* The C chain's executable: main and ten frames into libpp_chain.so. */
#include "chain.h"

#define STEP(name, next)                                                                           \
	__attribute__((noinline)) static int name(int x)                                           \
	{                                                                                          \
		volatile char pad[56];                                                             \
		pad[x & 31] = (char)x;                                                             \
		return next(x + 1) + pad[x & 31];                                                  \
	}

STEP(pp_main_09, pp_lib_00)
STEP(pp_main_08, pp_main_09)
STEP(pp_main_07, pp_main_08)
STEP(pp_main_06, pp_main_07)
STEP(pp_main_05, pp_main_06)
STEP(pp_main_04, pp_main_05)
STEP(pp_main_03, pp_main_04)
STEP(pp_main_02, pp_main_03)
STEP(pp_main_01, pp_main_02)
STEP(pp_main_00, pp_main_01)

int main(int argc, char **argv)
{
	(void)argv;
	return pp_main_00(argc) == -12345;
}
