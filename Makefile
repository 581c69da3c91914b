# WriteScope build.
#   make            deps (first, at parse time), then bin/writescope (+ bin/libwritescope_cuda.so when nvcc is on PATH;
#                   with MPI when mpicc is on PATH: mpirun -n N writescope sim grid, docs/scaleout.md)
#   make test       build and run the test suite (Criterion); prints its Synthesis line
#   make run        the paper's grid, Qwen3-30B-A3B on A100 (sim grid), on the default database
#   make bench-sim  the simulator core's throughput (events/s, ops/s): tests/perf/sim_bench.c
#   make sanitize   the same tests built with AddressSanitizer + UndefinedBehaviorSanitizer
#   make deps       install missing Debian packages (apt-get); a no-op when all are present
#   make fuzz       libFuzzer targets (clang) for FUZZ_SECONDS each on their seed corpora;
#                   make fuzz-smoke: 10 s each (CI); docs/fuzzing.md
#   make gpu-bundle download + extract the build dependencies into .gpu-deps/ for a machine
#                   without apt (tests/gpu/README.md); then build there with
#                   make DEPS_PREFIX=$PWD/.gpu-deps/prefix (tests/gpu/run.sh does it itself)
# Objects go to $(O)/, binaries to $(BIN)/; `make sanitize` uses build/san for both, `make fuzz`
# build/fuzz.

# The Debian packages come first, at parse time, so that what is looked up below (mpicc,
# nvcc) sees them on a fresh machine: the first `make run` builds with MPI. Sub-makes and
# `make clean` skip it; the fuzz goals add clang.
ifeq ($(WS_DEPS_CHECKED)$(filter clean,$(MAKECMDGOALS)),)
DEPS_RC := $(shell DEPS_PREFIX='$(DEPS_PREFIX)' ./scripts/deps.sh $(if $(filter fuzz fuzz-smoke fuzz-build,$(MAKECMDGOALS)),fuzz) >&2; echo $$?)
ifneq ($(DEPS_RC),0)
$(error make deps failed (scripts/deps.sh said why above))
endif
export WS_DEPS_CHECKED := 1
endif

CC      ?= cc
O       ?= build
BIN     ?= bin
SAN     ?=
NVCC    ?= $(shell command -v nvcc 2>/dev/null)
MPICC   ?= $(shell command -v mpicc 2>/dev/null)
CUDA_ARCHS ?= 70 80 90

DIRS    := common platform store kernels calib calib/probe runtime sim traces validate plots
INCS    := $(addprefix -I,$(DIRS)) -I$(O)/gen
# DEPS_PREFIX: a folder holding extracted Debian packages (scripts/gpu_bundle.sh). Headers
# and libraries are taken from it before the system's, the binaries find its libraries
# through an RPATH (--disable-new-dtags: an RPATH, unlike a RUNPATH, also serves the
# libraries' own dependencies, e.g. Criterion's libgit2), and `make deps` installs nothing.
ifneq ($(DEPS_PREFIX),)
DEPS_ABS:= $(abspath $(DEPS_PREFIX))
DEPS_LIB:= $(DEPS_ABS)/usr/lib/x86_64-linux-gnu
INCS    += -I$(DEPS_ABS)/usr/include -I$(DEPS_ABS)/usr/include/x86_64-linux-gnu
LDFLAGS += -L$(DEPS_LIB) -Wl,-rpath,$(DEPS_LIB) -Wl,--disable-new-dtags
export DEPS_PREFIX
endif
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -fPIC -pthread -MMD -MP $(INCS)
# oneDNN (bf16 and int8 expert GEMMs, kernels/gemm_bf16.c, gemm_int8.c) runs on OpenMP:
# those files are built with -fopenmp and everything links libgomp.
LDLIBS  := -lgsl -lopenblas -ldnnl -lgomp -lsqlite3 -ljansson -lnettle -ldl -lm -pthread
ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif

# FUZZ (make fuzz, built by clang): coverage and ASan+UBSan. The SIMD kernels, the probes
# and the platform layer read no outside input and rely on GCC's target pragmas: left out.
ifneq ($(FUZZ),)
CFLAGS  += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=all
DIRS    := $(filter-out kernels platform calib calib/probe,$(DIRS))
# calib's readers of outside input (Vidur's profiling CSVs, the files and folders holding
# them) need common/ only: kept.
FUZZ_SRC := calib/vidur_csv.c calib/import_files.c
endif

# MPI (platform/ws_par.c's "mpi" backend): Open MPI's compiler wrapper gives the flags; only
# that file is compiled with them, and every program links libmpi. Without mpicc the same
# commands run in one process. Fuzz builds leave platform/ out, and MPI with it.
ifneq ($(FUZZ),)
MPICC   :=
endif
ifneq ($(MPICC),)
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null) -DWS_HAVE_MPI
MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null)
LDLIBS     += $(MPI_LIBS)
$(O)/obj/platform/ws_par.o: CFLAGS += $(MPI_CFLAGS)
endif

LIB_SRC := $(foreach d,$(DIRS),$(wildcard $(d)/*.c)) $(FUZZ_SRC)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC:= $(wildcard tests/*.c)
CU_SRC  := $(wildcard kernels/cuda/*.cu)
EMBED_IN:= $(sort $(wildcard store/schema/*.sql)) profiles/datasheet.json

LIB_OBJ := $(patsubst %.c,$(O)/obj/%.o,$(LIB_SRC)) $(O)/obj/gen/embedded.o
CLI_OBJ := $(patsubst %.c,$(O)/obj/%.o,$(CLI_SRC))
TEST_OBJ:= $(patsubst %.c,$(O)/obj/%.o,$(TEST_SRC))
LIBWS   := $(O)/libwritescope.a
WS      := $(BIN)/writescope
TESTBIN := $(O)/tests/ws_tests

# CUDA: build for the requested architectures that this nvcc can target.
ifneq ($(NVCC),)
NVCC_ARCHS := $(shell $(NVCC) --list-gpu-arch 2>/dev/null | sed -n 's/^compute_//p')
CU_ARCHS   := $(filter $(NVCC_ARCHS),$(CUDA_ARCHS))
CU_MISSING := $(filter-out $(NVCC_ARCHS),$(CUDA_ARCHS))
CUDA_SO    := $(BIN)/libwritescope_cuda.so
comma      := ,
# SASS for each architecture, plus PTX of the newest so later GPUs can JIT it.
CU_PTX     := $(lastword $(CU_ARCHS))
CU_GENCODE := $(foreach a,$(CU_ARCHS),-gencode arch=compute_$(a)$(comma)code=sm_$(a)) \
              $(if $(CU_PTX),-gencode arch=compute_$(CU_PTX)$(comma)code=compute_$(CU_PTX))
CU_OBJ     := $(patsubst %.cu,$(O)/obj/%.o,$(CU_SRC))
NVFLAGS    := -O2 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra $(INCS) $(CU_GENCODE)
# The .so also carries the plain-C code its kernels share with the CPU side (the
# attention contract, the split-K plan, the ring/ping-pong bookkeeping), and links cuBLAS
# dynamically from this toolkit (rpath), so a machine without it fails the dlopen with
# the loader's message, which kernels/backend.c reports.
CU_CDEPS   := $(addprefix $(O)/obj/,common/ws_err.o common/ws_dtype.o kernels/attn_ref.o \
              kernels/attn_split.o kernels/gpu_book.o)
CUDA_LIBDIR:= $(firstword $(realpath $(addprefix $(dir $(realpath $(NVCC)))../,lib64 lib \
              targets/x86_64-linux/lib)))
CU_LDLIBS  := -L$(CUDA_LIBDIR) -Xlinker -rpath=$(CUDA_LIBDIR) -lcublas
endif
GPU_BENCH  := $(O)/tests/ws_gpu_bench
SIM_BENCH  := $(O)/tests/ws_sim_bench
PAR_CHECK  := $(O)/tests/ws_par_check
EXPERT_BENCH := $(O)/tests/ws_expert_bench

.PHONY: all deps test run sanitize mpi-info bench-sim bench-expert clean cuda-info gpu-bundle fuzz fuzz-smoke fuzz-build fuzz-bins fidelity
all: cuda-info mpi-info $(WS) $(CUDA_SO)

deps:
	@./scripts/deps.sh

gpu-bundle:
	@./scripts/gpu_bundle.sh

cuda-info:
ifeq ($(NVCC),)
	@echo "nvcc not found: building the CPU parts only (no CUDA backend; GPU features report 'no device')"
else
	@echo "nvcc $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'): CUDA backend for $(foreach a,$(CU_ARCHS),sm_$(a))"
	$(if $(CU_MISSING),@echo "warning: this nvcc cannot target $(foreach a,$(CU_MISSING),sm_$(a)) (CUDA 13 dropped Volta); build with CUDA <= 12.x for those")
endif

mpi-info:
ifeq ($(MPICC),)
	@echo "mpicc not found: building without MPI (sim grid runs in one process; make deps installs Open MPI)"
else
	@echo "mpicc $(MPICC): MPI backend built in (mpirun -n N bin/writescope sim grid ...)"
endif

$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(O)/obj/kernels/gemm_bf16.o $(O)/obj/kernels/gemm_int8.o: CFLAGS += -fopenmp

$(O)/gen/embedded.c: $(EMBED_IN) scripts/embed.sh
	@mkdir -p $(dir $@)
	./scripts/embed.sh $@ $(EMBED_IN)

$(O)/obj/gen/embedded.o: $(O)/gen/embedded.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBWS): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(WS): $(CLI_OBJ) $(LIBWS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(CLI_OBJ) $(LIBWS) $(LDLIBS) -o $@

$(O)/obj/kernels/cuda/%.o: kernels/cuda/%.cu $(wildcard kernels/*.h kernels/cuda/*.h) common/ws_err.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(CUDA_SO): $(CU_OBJ) $(CU_CDEPS)
	@mkdir -p $(dir $@)
	$(NVCC) -shared -cudart static $(CU_GENCODE) $^ $(CU_LDLIBS) -o $@

# The GPU benchmark of tests/gpu/run.sh (plain C: it reaches the GPU through the backend).
$(GPU_BENCH): $(O)/obj/tests/gpu/bench_gpu.o $(LIBWS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The simulator core's benchmark (tests/perf/sim_bench.c): built with the tests so it
# does not rot, run only by `make bench-sim`.
$(SIM_BENCH): $(O)/obj/tests/perf/sim_bench.o $(LIBWS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

# ws_par's map under one process or mpirun, driven by tests/test_par.c.
$(PAR_CHECK): $(O)/obj/tests/par/par_check.o $(LIBWS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

bench-sim: $(SIM_BENCH)
	$(SIM_BENCH)

# The bf16 expert FFN per backend at the models' expert shapes (tests/perf/expert_bench.c):
# built with the tests, run only by `make bench-expert` (BENCH_ARGS: threads repeats max-m).
$(EXPERT_BENCH): $(O)/obj/tests/perf/expert_bench.o $(LIBWS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

bench-expert: $(EXPERT_BENCH)
	$(EXPERT_BENCH) $(BENCH_ARGS)

# The CPU emulation of the GPU attention kernels (C++, no CUDA needed), linked
# into the tests so the kernels' logic is checked on machines without a GPU.
EMU_OBJ := $(O)/obj/tests/gpu/attn_emu.o
$(EMU_OBJ): tests/gpu/attn_emu.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(filter-out -std=c11,$(CFLAGS)) -std=c++17 -Wno-unknown-pragmas -c $< -o $@

# The AMX attention loop on software tiles (tests/amx/tile_emu.c), so that the tests run
# it on CPUs without AMX too.
TILE_EMU_OBJ := $(O)/obj/tests/amx/tile_emu.o

# The tests link the CLI's objects but its main (tests/test_cli_opts.c tests its option table).
CLI_LIB_OBJ := $(filter-out $(O)/obj/cli/main.o,$(CLI_OBJ))
$(TEST_OBJ): CFLAGS += -Icli
$(TESTBIN): $(TEST_OBJ) $(EMU_OBJ) $(TILE_EMU_OBJ) $(CLI_LIB_OBJ) $(LIBWS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(TEST_OBJ) $(EMU_OBJ) $(TILE_EMU_OBJ) $(CLI_LIB_OBJ) $(LIBWS) -lcriterion \
	    $(LDLIBS) -lstdc++ -o $@

test: all $(TESTBIN) $(GPU_BENCH) $(SIM_BENCH) $(EXPERT_BENCH) $(PAR_CHECK)
	WRITESCOPE_BIN=$(abspath $(WS)) $(if $(CUDA_SO),WRITESCOPE_CUDA_LIB=$(abspath $(CUDA_SO))) \
	    WRITESCOPE_PAR_CHECK=$(abspath $(PAR_CHECK)) $(if $(SAN),LSAN_OPTIONS=suppressions=$(abspath tests/lsan_mpi.supp)) \
	    $(TESTBIN) --jobs 2 $(TEST_ARGS)

# The paper's grid, Qwen3-30B-A3B on the A100 slice: every policy, modeled from the default
# database (the embedded datasheet profiles when none exists; no calibration needed).
run: all
	$(WS) sim grid --model qwen3-30b-a3b --gpu a100-40gb-pcie

# The simulator against published measurements (validate/fidelity.h, fidelity/e2e.json).
fidelity: all
	$(WS) fidelity

sanitize:
	$(MAKE) O=build/san BIN=build/san/bin SAN=1 test

# Fuzzing (docs/fuzzing.md): every fuzz/fuzz_<name>.c is a libFuzzer target, run on a copy
# of its seed corpus fuzz/corpus/<name>/. The library is rebuilt by clang into build/fuzz
# with coverage and ASan+UBSan; only the targets link the libFuzzer driver.
FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 60
FUZZ_NAMES    := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
.SECONDARY: $(patsubst %,$(O)/obj/fuzz/fuzz_%.o,$(FUZZ_NAMES))
$(O)/fuzz_%: $(O)/obj/fuzz/fuzz_%.o $(LIBWS)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) $^ $(LDLIBS) -o $@
# The option parser's target also links the two CLI files it drives: the parser and the
# checks sim and plan share (cli/opts.c, cli/workload.c; neither needs MPI, calib or a store).
$(O)/obj/fuzz/fuzz_cli_opts.o: CFLAGS += -Icli
$(O)/fuzz_cli_opts: $(O)/obj/fuzz/fuzz_cli_opts.o $(O)/obj/cli/opts.o $(O)/obj/cli/workload.o \
                    $(LIBWS)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) $^ $(LDLIBS) -o $@

fuzz-bins: $(addprefix $(O)/fuzz_,$(FUZZ_NAMES))

fuzz-build:
	$(MAKE) O=build/fuzz BIN=build/fuzz/bin CC=$(FUZZ_CC) NVCC= FUZZ=1 fuzz-bins

fuzz: fuzz-build
	./scripts/fuzz.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-smoke: fuzz-build
	./scripts/fuzz.sh build/fuzz 10 $(FUZZ_NAMES)

clean:
	rm -rf build bin

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
