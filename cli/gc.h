/* gc.h - "kvtier gc" (gc.c). */
#ifndef KVT_CLI_GC_H
#define KVT_CLI_GC_H

int gc_main(int argc, char **argv);

#endif
