/* `pebsprof run`: the continuous node agent. */
#ifndef PP_CMD_RUN_H
#define PP_CMD_RUN_H

/* Runs the subcommand; argv[0] is "run". Returns the process exit status. */
int pp_cmd_run(int argc, char **argv);

#endif /* PP_CMD_RUN_H */
