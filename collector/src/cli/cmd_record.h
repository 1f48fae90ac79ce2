/* `pebsprof record`: a bounded capture written to local files. */
#ifndef PP_CMD_RECORD_H
#define PP_CMD_RECORD_H

/* Runs the subcommand; argv[0] is "record". Returns the process exit status. */
int pp_cmd_record(int argc, char **argv);

#endif /* PP_CMD_RECORD_H */
