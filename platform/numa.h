/* numa: which NUMA node each CPU this process may run on belongs to, where a range of
 * memory is placed, and the rule by which the CPU region spreads a sequence's pages over
 * nodes. The thread pool pins its threads node by node from this map and runs each task
 * on its data's node (pool.h); the CPU attention kernel tags its tasks with the node of
 * their pages (ws_attn_seq.page_nodes); `writescope bench attn-cpu` and the calibrator
 * place their KV by the rule below (kv_slab.h). On a two-socket server a core reads the other
 * socket's memory at roughly half the bandwidth of its own (and sub-NUMA clustering splits one
 * socket into two to four nodes), so the CPU region must be read where it lies
 * (docs/design.md: NUMA-local).
 *
 * The topology comes from Linux's sysfs (<dir>/node<N>/cpulist), restricted to the CPUs
 * the process may run on; nodes with no such CPU (memory-only, CXL) are left out. Without
 * sysfs (or on a kernel built without NUMA) the machine is one node numbered 0. Memory
 * placement uses the mbind and get_mempolicy system calls directly (no libnuma). How the
 * pieces fit together: docs/notes/numa.md. */
#ifndef WS_NUMA_H
#define WS_NUMA_H

#include <stddef.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_NUMA_MAX_NODES 64  /* nodes kept; more is an error */
#define WS_NUMA_MAX_CPUS 1024 /* CPU numbers below this (glibc's CPU_SETSIZE) */

typedef struct ws_numa {
    int n_nodes;                      /* >= 1 */
    int node_id[WS_NUMA_MAX_NODES];   /* the OS's number of node index i, ascending */
    int n_cpus[WS_NUMA_MAX_NODES];    /* CPUs of node index i the process may use */
    short cpu_node[WS_NUMA_MAX_CPUS]; /* node index of each CPU, -1: not usable */
} ws_numa;

/* Parses a Linux CPU list ("0-3,8,10-11", surrounding white space allowed) into
 * cpus[WS_NUMA_MAX_CPUS] (1 = listed); 0, or WS_EPARSE with a message. */
int ws_numa_parse_cpulist(const char *s, unsigned char *cpus, ws_err *err);
/* The topology under a sysfs node directory (normally /sys/devices/system/node),
 * restricted to the CPUs in `allowed` (NULL: the process's affinity mask). A missing
 * directory gives one node, id 0, holding every allowed CPU; a malformed cpulist is
 * WS_EPARSE. */
int ws_numa_read(ws_numa *t, const char *dir, const unsigned char *allowed, ws_err *err);
/* ws_numa_read of /sys/devices/system/node for this process. */
int ws_numa_detect(ws_numa *t, ws_err *err);
/* Node index of an OS node number, or -1 when no usable CPU is on it. */
int ws_numa_index(const ws_numa *t, int node_id);
/* The CPUs in the order threads should be pinned to them: the first CPU of each node in
 * turn, then the second of each, ..., so the first k threads spread over the nodes as
 * evenly as k allows (a single node: the usable CPUs in ascending order). Writes up to
 * max CPU numbers, returns how many. */
int ws_numa_cpu_order(const ws_numa *t, int *order, int max);

/* Asks that the pages of [addr, addr + len) not yet touched be placed on OS node `node`
 * (preferred, so a full node falls back to another rather than failing); addr must be
 * page-aligned. 0, or WS_EUNSUP (kernel without NUMA) / WS_EINVAL with a message. */
int ws_numa_prefer(void *addr, size_t len, int node, ws_err *err);
/* The OS node the page holding addr lies on (it must have been touched), or -1 when the
 * kernel cannot tell. */
int ws_numa_node_of(const void *addr);

/* The CPU region's placement rule: the node index (of n_nodes) for page `page` of
 * sequence `seq` with pages of page_tokens tokens. A sequence's pages go to the nodes in
 * runs of WS_NUMA_RUN_TOKENS tokens (at least one page), in turn, starting from node
 * seq mod n_nodes: one long sequence still reads every node's memory, and a batch's
 * sequences start on different nodes. */
#define WS_NUMA_RUN_TOKENS 8192
int ws_numa_place(int seq, int page, int page_tokens, int n_nodes);

#ifdef __cplusplus
}
#endif
#endif
