/* numa: see numa.h. */
#include "numa.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NODE_BITS 1024    /* node numbers mbind's mask covers (Linux's largest MAX_NUMNODES) */
#define MPOL_PREFERRED_ 1 /* linux/mempolicy.h */
#define MPOL_F_NODE_ 1
#define MPOL_F_ADDR_ 2

int ws_numa_parse_cpulist(const char *s, unsigned char *cpus, ws_err *err)
{
    memset(cpus, 0, WS_NUMA_MAX_CPUS);
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    while (*p && !isspace((unsigned char)*p)) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0)
            return ws_err_set(err, WS_EPARSE, "CPU list \"%s\": expected a CPU number at \"%s\"", s,
                              p);
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a)
                return ws_err_set(err, WS_EPARSE, "CPU list \"%s\": bad range at \"%s\"", s, p);
            p = end;
        }
        if (b >= WS_NUMA_MAX_CPUS)
            return ws_err_set(err, WS_EPARSE, "CPU list \"%s\": CPU %ld is %d or more", s, b,
                              WS_NUMA_MAX_CPUS);
        for (long c = a; c <= b; c++)
            cpus[c] = 1;
        if (*p == ',')
            p++;
        else if (*p && !isspace((unsigned char)*p))
            return ws_err_set(err, WS_EPARSE, "CPU list \"%s\": unexpected \"%c\"", s, *p);
    }
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return ws_err_set(err, WS_EPARSE, "CPU list \"%s\": trailing \"%s\"", s, p);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int ws_numa_read(ws_numa *t, const char *dir, const unsigned char *allowed, ws_err *err)
{
    unsigned char mask[WS_NUMA_MAX_CPUS];
    if (!allowed) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set))
            return ws_err_set(err, WS_EINVAL, "NUMA: cannot read this process's CPU mask: %s",
                              strerror(errno));
        for (int c = 0; c < WS_NUMA_MAX_CPUS; c++)
            mask[c] = c < CPU_SETSIZE && CPU_ISSET(c, &set);
        allowed = mask;
    }
    memset(t, 0, sizeof *t);
    for (int c = 0; c < WS_NUMA_MAX_CPUS; c++)
        t->cpu_node[c] = -1;

    /* The node numbers, ascending. */
    int ids[WS_NUMA_MAX_NODES], n = 0;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            int id;
            char tail;
            if (sscanf(e->d_name, "node%d%c", &id, &tail) != 1 || id < 0)
                continue;
            if (n == WS_NUMA_MAX_NODES) {
                closedir(d);
                return ws_err_set(err, WS_EUNSUP, "NUMA: %s lists more than %d nodes", dir,
                                  WS_NUMA_MAX_NODES);
            }
            ids[n++] = id;
        }
        closedir(d);
    }
    qsort(ids, (size_t)n, sizeof *ids, cmp_int);

    for (int i = 0; i < n; i++) {
        char path[4096], line[8192];
        snprintf(path, sizeof path, "%s/node%d/cpulist", dir, ids[i]);
        FILE *f = fopen(path, "r");
        if (!f)
            return ws_err_set(err, WS_EIO, "NUMA: cannot read %s: %s", path, strerror(errno));
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        fclose(f);
        unsigned char cpus[WS_NUMA_MAX_CPUS];
        int rc = ws_numa_parse_cpulist(line, cpus, err);
        if (rc) {
            ws_err_prefix(err, "NUMA: %s", path);
            return rc;
        }
        const int k = t->n_nodes;
        for (int c = 0; c < WS_NUMA_MAX_CPUS; c++)
            if (cpus[c] && allowed[c] && t->cpu_node[c] < 0) {
                t->cpu_node[c] = (short)k;
                t->n_cpus[k]++;
            }
        if (t->n_cpus[k]) { /* keep nodes this process can run on */
            t->node_id[k] = ids[i];
            t->n_nodes++;
        }
    }
    /* No sysfs (or no usable node in it): one node 0 with every allowed CPU; allowed CPUs
     * sysfs did not place join the first node. */
    if (!t->n_nodes) {
        t->n_nodes = 1;
        t->node_id[0] = 0;
    }
    for (int c = 0; c < WS_NUMA_MAX_CPUS; c++)
        if (allowed[c] && t->cpu_node[c] < 0) {
            t->cpu_node[c] = 0;
            t->n_cpus[0]++;
        }
    return 0;
}

int ws_numa_detect(ws_numa *t, ws_err *err)
{
    return ws_numa_read(t, "/sys/devices/system/node", NULL, err);
}

int ws_numa_index(const ws_numa *t, int node_id)
{
    for (int i = 0; i < t->n_nodes; i++)
        if (t->node_id[i] == node_id)
            return i;
    return -1;
}

int ws_numa_cpu_order(const ws_numa *t, int *order, int max)
{
    int k = 0, seen[WS_NUMA_MAX_NODES] = {0}, left = 1;
    while (left && k < max) { /* round r takes the r-th CPU of each node */
        left = 0;
        for (int i = 0; i < t->n_nodes && k < max; i++) {
            int r = seen[i]++, c = 0;
            for (; c < WS_NUMA_MAX_CPUS; c++)
                if (t->cpu_node[c] == i && r-- == 0)
                    break;
            if (c < WS_NUMA_MAX_CPUS) {
                order[k++] = c;
                left = 1;
            }
        }
    }
    return k;
}

int ws_numa_prefer(void *addr, size_t len, int node, ws_err *err)
{
    if (node < 0 || node >= NODE_BITS)
        return ws_err_set(err, WS_EINVAL, "NUMA: node %d out of range", node);
    unsigned long mask[NODE_BITS / (8 * sizeof(unsigned long))] = {0};
    const int bits = 8 * (int)sizeof(unsigned long);
    mask[node / bits] = 1ul << (node % bits);
    /* maxnode counts one more than the mask's bits (the kernel drops the last one). */
    if (syscall(SYS_mbind, addr, len, MPOL_PREFERRED_, mask, (unsigned long)NODE_BITS + 1, 0u)) {
        int e = errno;
        return ws_err_set(err, e == ENOSYS ? WS_EUNSUP : WS_EINVAL,
                          "NUMA: cannot place %zu bytes at %p on node %d: %s", len, addr, node,
                          strerror(e));
    }
    return 0;
}

int ws_numa_node_of(const void *addr)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0ul, addr,
                (unsigned long)(MPOL_F_NODE_ | MPOL_F_ADDR_)))
        return -1;
    return node;
}

int ws_numa_place(int seq, int page, int page_tokens, int n_nodes)
{
    if (n_nodes <= 1)
        return 0;
    int run = page_tokens > 0 ? WS_NUMA_RUN_TOKENS / page_tokens : 1;
    if (run < 1)
        run = 1;
    return (int)(((long)seq + page / run) % n_nodes);
}
