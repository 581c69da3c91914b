/* cpu_speed: are this host's CPUs equally fast? On a shared (virtual) host a CPU may run at
 * a lower clock or share its core with a neighbour, and the attention loop's threads then
 * run at different speeds. This probe pins itself to each CPU in turn and prints, three
 * times each:
 *   add      TSC cycles per dependent integer add (1 / the core's clock in TSC units when
 *            it has the core to itself);
 *   tdp      TSC cycles per TDPBF16PS on full 16x16 tiles, four accumulators (the AMX
 *            rate the MLA loop follows), when the CPU has AMX.
 * Build and run (x86-64, Linux):
 *   gcc -O2 scripts/cpu_speed.c -o build/cpu_speed && build/cpu_speed */
#define _GNU_SOURCE
#include <immintrin.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <x86intrin.h>

#include "amx_probe.h"

static double add_chain(void)
{
    const long n = 100000000;
    uint64_t x = 1;
    const uint64_t t0 = __rdtsc();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add $1, %0" : "+r"(x));
    return (double)(__rdtsc() - t0) / (double)n;
}

__attribute__((target("amx-tile,amx-bf16"))) static double tdp_rate(void)
{
    static const char zeros[1024] __attribute__((aligned(64)));
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const int n = 500000;
    const uint64_t t0 = __rdtsc();
    for (int i = 0; i < n; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 5, 7);
        _tile_dpbf16ps(2, 4, 7);
        _tile_dpbf16ps(3, 5, 6);
    }
    return (double)(__rdtsc() - t0) / (4.0 * n);
}

int main(void)
{
    const int amx = amx_probe_init("cpu_speed") == 0; /* pins to CPU 0, configures tiles */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) {
        perror("cpu_speed: sched_getaffinity");
        return 1;
    }
    const long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (int cpu = 0; cpu < n_cpus && cpu < CPU_SETSIZE; cpu++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one))
            continue; /* not ours to run on */
        for (int r = 0; r < 3; r++) {
            printf("cpu %d: add %.3f TSC cycles", cpu, add_chain());
            if (amx)
                printf(", tdp %.1f TSC cycles", tdp_rate());
            printf("\n");
        }
    }
    return 0;
}
