/*
 * top.h - `kvtier top` (top.c): a live view of kvtierd servers from their
 * /metrics.  main()'s shape; argv[0] is "top".
 */
#ifndef KVT_CLI_TOP_H
#define KVT_CLI_TOP_H

int top_main(int argc, char **argv);

#endif
