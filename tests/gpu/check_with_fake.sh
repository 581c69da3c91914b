#!/usr/bin/env bash
# tests/gpu/check_with_fake.sh: runs the GPU test (tests/test_gpu.c) against the host-memory
# fake backend (tests/gpu/fake_backend.c) to check the test's own logic without a GPU.
# Slow (minutes: every attention call is an emulation of all its CUDA threads). Not part
# of make test; a development aid for whoever edits test_gpu.c or the backend table.
set -eu
cd "$(dirname "$0")/../.."
make -s build/tests/ws_tests
so=build/tests/libfake_backend.so
cc -O2 -std=c11 -D_GNU_SOURCE -fPIC -shared -Wall -Wextra -Icommon -Ikernels -Itests \
    tests/gpu/fake_backend.c build/obj/kernels/attn_ref.o build/obj/kernels/attn_split.o \
    build/obj/kernels/gpu_book.o build/obj/common/ws_err.o build/obj/common/ws_dtype.o \
    build/obj/tests/gpu/attn_emu.o -lstdc++ -lm -pthread -o "$so"
WRITESCOPE_CUDA_LIB="$PWD/$so" build/tests/ws_tests --filter 'gpu/*'
