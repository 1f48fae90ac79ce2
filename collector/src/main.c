/* pebsprof: subcommand dispatch. */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "pebsprof: not built yet\n");
	return 1;
}
