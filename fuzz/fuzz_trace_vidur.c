/* fuzz_trace_vidur: libFuzzer target for the vidur trace importer (traces/trace_vidur.c): each
 * input is read as that format strictly, with skip_bad and detected, and written back as
 * our CSV and re-read (fuzz_trace_check.h says what is checked). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_trace_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_trace_run(WS_TRACE_VIDUR, data, size);
    return 0;
}
