/*
 * drain.h - "kvtier drain" (drain.c): main()'s shape, its own name as argv[0].
 */
#ifndef KVT_CLI_DRAIN_H
#define KVT_CLI_DRAIN_H

int drain_main(int argc, char **argv);

#endif
