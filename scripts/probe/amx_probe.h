/* amx_probe: the set-up the AMX probes in scripts/probe/ share (prefetch_vs_tile_loads.c,
 * vector_beside_tile_products.c, tile_register_count.c, read_ceiling.c): pin the calling
 * thread to CPU 0, ask Linux for the tile state, and configure all eight tiles as 16 rows
 * x 64 bytes. Header-only, for programs built on their own with gcc. */
#ifndef WS_AMX_PROBE_H
#define WS_AMX_PROBE_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_probe_tilecfg;

/* LDTILECFG: all eight tiles 16 rows x 64 bytes, every tile in its init state (zero). */
static inline void amx_probe_configure(void)
{
    amx_probe_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++)
        c.rows[i] = 16, c.colsb[i] = 64;
    __asm__ volatile("ldtilecfg %0" ::"m"(c)); /* whole 64 bytes (see attn_cpu_amx.c) */
}

/* 0 when the tiles are ready; else prints why (prefixed by `name`) and returns 1. */
static inline int amx_probe_init(const char *name)
{
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(0, &cs);
    sched_setaffinity(0, sizeof cs, &cs);
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) {
        fprintf(stderr, "%s: the kernel does not grant AMX tiles here\n", name);
        return 1;
    }
    amx_probe_configure();
    return 0;
}

#endif
