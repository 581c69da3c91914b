/* cpu_speed_per_cpu: are this host's CPUs equally fast? On a shared (virtual) host a CPU may run at
 * a lower clock or share its core with a neighbour, and the attention loop's threads then
 * run at different speeds. This probe pins itself to each CPU in turn and prints, three
 * times each:
 *   add      TSC cycles per dependent integer add (1 / the core's clock in TSC units when
 *            it has the core to itself);
 *   tdp      TSC cycles per TDPBF16PS on full 16x16 tiles, the kernel's peak loop (two
 *            accumulators, four tiles in use), when the CPU has AMX. With all eight tiles
 *            in use the rate moves 2x between minutes (scripts/probe/tile_register_count.c); with four,
 *            14-15 cycles on the development host.
 * Build (after `make`, which builds the library whose peak loop it times) and run:
 *   gcc -O2 -D_GNU_SOURCE -Icommon -Iplatform -Ikernels scripts/probe/cpu_speed_per_cpu.c \
 *       build/libwritescope.a -lm -pthread -o build/cpu_speed_per_cpu && build/cpu_speed_per_cpu */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <x86intrin.h>

#include "attn_cpu.h"
#include "attn_cpu_amx.h"

static double add_chain(void)
{
    const long n = 100000000;
    uint64_t x = 1;
    const uint64_t t0 = __rdtsc();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add $1, %0" : "+r"(x));
    return (double)(__rdtsc() - t0) / (double)n;
}

/* TSC cycles per TDPBF16PS: the kernel's own peak loop (four accumulators). */
static double tdp_rate(void)
{
    const int n = 500000;
    const uint64_t t0 = __rdtsc();
    ws_attn_cpu_amx_peak_flops(n);
    return (double)(__rdtsc() - t0) / (4.0 * n);
}

int main(void)
{
    const int amx = ws_isa_supported(WS_ISA_AMX); /* CPU and OS: tiles granted */
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
