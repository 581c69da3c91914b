/* tile_emu: the AMX attention loop on software tiles, for tests on CPUs without AMX (see
 * tile_emu.c). Install it with ws_attn_cpu_amx_emulate(ws_attn_cpu_amx_emu_attend). */
#ifndef WS_TILE_EMU_H
#define WS_TILE_EMU_H

#include "attn_cpu_amx.h"

ws_attn_cpu_amx_attend_fn ws_attn_cpu_amx_emu_attend;

#endif
