/*
 * admin.h - kvtier's operator commands (admin.c): each has main()'s shape
 * and receives its own name as argv[0].
 */
#ifndef KVT_CLI_ADMIN_H
#define KVT_CLI_ADMIN_H

int admin_stat(int argc, char **argv);
int admin_ls(int argc, char **argv);
int admin_get(int argc, char **argv);
int admin_put(int argc, char **argv);
int admin_rm(int argc, char **argv);
int admin_clear(int argc, char **argv);
int admin_fsck(int argc, char **argv);
int admin_who(int argc, char **argv);

#endif
