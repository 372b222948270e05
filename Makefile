# lmt: build liblmt.a, the tools, the tests.
#
#   make            library and tools (build/bin/)
#   make check      every test that needs no GPU (installs missing packages first),
#                   then check-gpu, which says that it skips where there is no GPU
#   make check-gpu  the cuda backend's tests (scripts/check-gpu): ops and training
#   make demo       the main job on the built-in corpus
#   make config     what this machine's build includes (cuda, nccl, mpi, pmix)
#   scripts/gpu-check  the GPU checks and facts, where a GPU is (skips plainly elsewhere)
#   make bench-gemm the GEMM benchmark driver (scripts/bench/gemm runs it)
#   make -j         works; CUDA objects are built only where nvcc exists
#
# Variables: CC, CFLAGS_OPT (default -O2), CUDA_HOME (default /usr/local/cuda),
# NVCC (default $(CUDA_HOME)/bin/nvcc if it exists), WITH_CUDA, WITH_NCCL,
# WITH_MPI, WITH_PMIX (0 leaves a part out even where it is found), B (build
# directory), V=1 to see the full commands.

CC ?= gcc
B ?= build
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(wildcard $(CUDA_HOME)/bin/nvcc)
CFLAGS_OPT ?= -O2

# oneDNN (libdnnl-dev) has no pkg-config file in Debian: -ldnnl below
PKGS := libpcre2-8 jansson libarchive libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
REVISION := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)

WARN := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
# clang has no libmvec vector variants of expf/tanhf, so the CPU backend's `omp simd`
# loops over them stay scalar there (gcc vectorises them): a fact, not a defect
IS_CLANG := $(shell $(CC) --version 2>/dev/null | grep -q clang && echo 1)
ifeq ($(IS_CLANG),1)
WARN += -Wno-pass-failed
endif
CFLAGS := -std=c11 -D_GNU_SOURCE -g $(CFLAGS_OPT) $(WARN) -fopenmp -pthread -Ilib -Itools/common \
	$(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS := $(PKG_LIBS) -ldnnl -fopenmp -pthread -lmvec -lm $(EXTRA_LDFLAGS)

# The library, plane by plane (lib/<plane>/; see README "Layout").
PLANES := core data model backend comm ckpt report plan
LIB_SRC := $(foreach p,$(PLANES),$(wildcard lib/$(p)/*.c))
LIB_HDR := $(foreach p,$(PLANES),$(wildcard lib/$(p)/*.h))
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o)
TOOL_SRC := $(wildcard tools/*.c)
TOOLS := $(TOOL_SRC:tools/%.c=$(B)/bin/%)
TOOL_COMMON_SRC := $(wildcard tools/common/*.c)
TOOL_COMMON := $(TOOL_COMMON_SRC:%.c=$(B)/%.o)
# a tool too big for one file keeps the rest in tools/TOOL/, linked into it alone
TOOL_PART_HDR := $(wildcard tools/*/*.h)

# Optional parts, each probed the same way: present (and not switched off with
# WITH_<PART>=0) means built in, with -DLMT_HAVE_<PART>. `make config` prints the
# result; `make` prints it once at the end of a build that changed something.
WITH_CUDA ?= 1
WITH_NCCL ?= 1
WITH_MPI ?= 1
WITH_PMIX ?= 1
HAVE_CUDA := $(if $(filter 1,$(WITH_CUDA)),$(if $(NVCC),1))
HAVE_NCCL := $(if $(HAVE_CUDA),$(if $(filter 1,$(WITH_NCCL)),$(if $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),1)))
HAVE_MPI := $(if $(filter 1,$(WITH_MPI)),$(shell pkg-config --exists ompi-c 2>/dev/null && echo 1))
HAVE_PMIX := $(if $(filter 1,$(WITH_PMIX)),$(shell pkg-config --exists pmix 2>/dev/null && echo 1))

# CUDA_ARCHS: the GPUs the kernels are built for: machine code for each (sm_80:
# A100, sm_90: H100/H200) plus PTX of the newest, which later GPUs compile at load.
# A development build may name one (make CUDA_ARCHS=90) to halve nvcc's time.
CUDA_ARCHS ?= 80 90
ifeq ($(HAVE_CUDA),1)
CU_SRC := $(wildcard kernels/*.cu)
CU_OBJ := $(CU_SRC:%.cu=$(B)/%.o)
CU_HDR := $(wildcard kernels/*.h kernels/*.cuh)
# cuBLASLt is opened at run time by the cuda backend (lib/backend/cuda.c), from the
# loader's search path or else from LMT_CUDA_LIBDIR, not linked into every tool
CFLAGS += -DLMT_HAVE_CUDA -I$(CUDA_HOME)/include -DLMT_CUDA_LIBDIR='"$(CUDA_HOME)/lib64"'
LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++ -Wl,-rpath,$(CUDA_HOME)/lib64
CUDA_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
	-gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS))
NVCCFLAGS ?= -O2 -std=c++17 --compiler-options -Wall,-Werror,-fPIC -Werror all-warnings
NVCCFLAGS += -Ilib
endif
# lib/comm/nccl.c: NCCL's shared library (it carries its own CUDA runtime)
ifeq ($(HAVE_NCCL),1)
CFLAGS += -DLMT_HAVE_NCCL
LDLIBS += -L$(CUDA_HOME)/lib64 -lnccl -Wl,-rpath,$(CUDA_HOME)/lib64
endif
# lib/comm/mpi.c and pmix.c: their headers and libraries from pkg-config (Debian's
# ompi-c also names the pmix2 include directory; pmix adds an rpath to its own)
ifeq ($(HAVE_MPI),1)
CFLAGS += -DLMT_HAVE_MPI $(shell pkg-config --cflags ompi-c)
LDLIBS += $(shell pkg-config --libs ompi-c)
endif
ifeq ($(HAVE_PMIX),1)
CFLAGS += -DLMT_HAVE_PMIX $(shell pkg-config --cflags pmix)
LDLIBS += $(shell pkg-config --libs pmix)
endif
yesno = $(if $(1),yes,no)
CONFIG_LINE := cuda $(call yesno,$(HAVE_CUDA))$(if $(HAVE_CUDA), ($(NVCC); kernels for $(CUDA_ARCHS:%=sm_%) + PTX \
	compute_$(lastword $(CUDA_ARCHS)); backend cuda)), nccl $(call yesno,$(HAVE_NCCL)), \
	mpi $(call yesno,$(HAVE_MPI)), pmix $(call yesno,$(HAVE_PMIX))

ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2);
endif

UNIT_SRC := $(wildcard tests/unit/test-*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

.PHONY: all check check-gpu check-sanitize demo clean deps tests config
.SECONDARY:
all: $(B)/config.txt $(TOOLS)

config:
	@echo "lmt build: $(words $(LIB_SRC)) library sources in $(PLANES), $(words $(TOOLS)) tools; $(CONFIG_LINE)"

# what the last build was configured with; rewritten (and printed) only when it changes
$(B)/config.txt: FORCE
	@mkdir -p $(@D)
	@echo "$(CONFIG_LINE)" > $@.new; if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; \
	 echo "  built with: $(CONFIG_LINE)"; fi
# phony: under .SECONDARY (every target) a missing FORCE is an intermediate make
# would not remake, and a changed configuration would not rebuild anything
.PHONY: FORCE
FORCE:

$(B)/liblmt.a: $(LIB_OBJ) $(CU_OBJ)
	@mkdir -p $(@D)
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $^

$(B)/lib/core/version.o: CFLAGS += -DLMT_REVISION='"$(REVISION)"'
# the compute kernels: full vectorisation (the rest of the code stays at -O2)
$(B)/lib/backend/cpu.o: CFLAGS += -O3
# the revision changes with HEAD and the index (a worktree's .git is a file: ask git)
GIT_DIR := $(shell git rev-parse --git-dir 2>/dev/null)
$(B)/lib/core/version.o: $(wildcard $(GIT_DIR)/HEAD $(GIT_DIR)/index)

$(B)/%.o: %.c $(LIB_HDR) $(TOOL_PART_HDR) $(B)/config.txt
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CFLAGS) -c -o $@ $<

$(B)/kernels/%.o: kernels/%.cu $(LIB_HDR) $(CU_HDR) $(B)/config.txt
	@mkdir -p $(@D)
	$(call say,NVCC,$<)$(NVCC) $(NVCCFLAGS) $(CUDA_GENCODE) -c -o $@ $<
$(B)/lib/backend/cuda.o: $(CU_HDR)

$(foreach t,$(TOOL_SRC:tools/%.c=%),$(eval $(B)/bin/$(t): $(patsubst %.c,$(B)/%.o,$(wildcard tools/$(t)/*.c))))
$(B)/bin/%: $(B)/tools/%.o $(TOOL_COMMON) $(B)/liblmt.a
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(CFLAGS) -o $@ $(filter %.o,$^) $(B)/liblmt.a $(LDLIBS)

$(B)/tests/%: tests/unit/%.c tests/unit/tap.h tests/unit/fixtures.h $(B)/liblmt.a
	@mkdir -p $(@D)
	$(call say,TEST,$@)$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(B)/liblmt.a $(LDLIBS)

tests: $(B)/config.txt $(TOOLS) $(UNIT_BIN)

# scripts/bench's measure of what N threads can gain on this machine now: no
# library, built with everything so that the benchmarks and tests find it
BENCH_CEILING := $(B)/bench/ceiling
all: $(BENCH_CEILING)
tests: $(BENCH_CEILING)
$(BENCH_CEILING): scripts/bench/ceiling.c $(B)/config.txt
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) -std=c11 -D_GNU_SOURCE -g $(CFLAGS_OPT) $(WARN) -pthread $(EXTRA_CFLAGS) \
		-o $@ $< $(EXTRA_LDFLAGS)

# scripts/gpu-check's probe and facts (scripts/gpu-facts.cu): built where nvcc
# exists, so that `make` proves it compiles; it runs only where a GPU is
ifeq ($(HAVE_CUDA),1)
GPU_FACTS := $(B)/scripts/gpu-facts
all: $(GPU_FACTS)
$(GPU_FACTS): scripts/gpu-facts.cu $(B)/config.txt
	@mkdir -p $(@D)
	$(call say,NVCC,$<)$(NVCC) $(NVCCFLAGS) $(if $(HAVE_NCCL),-DLMT_HAVE_NCCL) -o $@ $< -lcublasLt \
		$(if $(HAVE_NCCL),-lnccl) -Xlinker -rpath,$(CUDA_HOME)/lib64
endif

# scripts/bench/gemm's driver: linked from the GEMM objects alone
BENCH_GEMM_OBJ := $(addprefix $(B)/lib/,backend/cpu_gemm.o backend/peak.o core/dtype.o core/error.o)
.PHONY: bench-gemm
bench-gemm: $(B)/bench/gemm-bench
$(B)/bench/gemm-bench: scripts/bench/gemm-bench.c $(BENCH_GEMM_OBJ)
	@mkdir -p $(@D)
	$(call say,LINK,$@)$(CC) $(CFLAGS) -o $@ $< $(BENCH_GEMM_OBJ) $(LDLIBS)

deps:
	@scripts/install-deps

check: deps
	@$(MAKE) --no-print-directory tests
	@B=$(B) tests/run
	@B=$(B) scripts/check-gpu

# the cuda backend against the references and the CPU backend, where a GPU is
check-gpu:
	@$(MAKE) --no-print-directory tests
	@B=$(B) scripts/check-gpu

# The whole suite built with clang's AddressSanitizer and UndefinedBehaviorSanitizer,
# no recovery: the first report fails the test that triggered it.
SAN_B ?= $(B)/sanitize
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
check-sanitize: deps
	@$(MAKE) --no-print-directory B=$(SAN_B) CC=clang CFLAGS_OPT="-O1" EXTRA_CFLAGS="$(SAN_FLAGS)" \
		EXTRA_LDFLAGS="$(SAN_FLAGS)" WITH_CUDA=0 tests
	@ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		B=$(SAN_B) tests/run

# Fuzz targets (tests/fuzz/fuzz-NAME.c, libFuzzer): every parser of untrusted bytes.
# The library is compiled a second time, apart, with clang's fuzzer coverage, ASan
# and UBSan, and with -DLMT_FUZZ, which skips checksum comparisons so that mutated
# inputs get past them (never set by make, make check or check-sanitize).
#   make fuzz [FUZZ_SECONDS=N]   each target for N seconds (60) on its seeds
#                                (tests/fuzz/seeds/NAME/) plus what it found before
#                                ($(B)/fuzz/corpus/NAME/); crashes in $(B)/fuzz/
#   make fuzz-build              just the binaries, $(B)/fuzz/fuzz-NAME
# make check builds them where clang has libFuzzer; tests/cli/fuzz.sh runs each a few
# seconds on its seeds. See tests/fuzz/README.
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	-DLMT_FUZZ
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz-%.c,%,$(wildcard tests/fuzz/fuzz-*.c))
FUZZ_PROBE := printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' | \
	clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null
.PHONY: fuzz fuzz-build fuzz-bins fuzz-if-clang
fuzz-build: deps
	@$(FUZZ_PROBE) || { echo "make fuzz: needs clang with libFuzzer (-fsanitize=fuzzer)" >&2; exit 1; }
	@$(MAKE) --no-print-directory B=$(B)/fuzz-lib CC=clang CFLAGS_OPT="-O1" EXTRA_CFLAGS="$(FUZZ_FLAGS)" \
		WITH_CUDA=0 FUZZ_OUT=$(B)/fuzz fuzz-bins
ifneq ($(FUZZ_OUT),)
fuzz-bins: $(FUZZ_NAMES:%=$(FUZZ_OUT)/fuzz-%)
$(FUZZ_OUT)/fuzz-%: tests/fuzz/fuzz-%.c $(wildcard tests/fuzz/*.h) $(B)/liblmt.a
	@mkdir -p $(@D)
	$(call say,FUZZ,$@)$(CC) $(CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< $(B)/liblmt.a $(LDLIBS)
endif
fuzz: fuzz-build
	@for t in $(FUZZ_NAMES); do mkdir -p $(B)/fuzz/corpus/$$t || exit 1; \
		echo "fuzz $$t: $(FUZZ_SECONDS) s"; \
		$(B)/fuzz/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix=$(B)/fuzz/$$t- $(B)/fuzz/corpus/$$t tests/fuzz/seeds/$$t || exit 1; done
# make check: built first where clang can, so that the test only runs them
check: fuzz-if-clang
fuzz-if-clang: deps
	@if $(FUZZ_PROBE); then $(MAKE) --no-print-directory fuzz-build; \
	else echo "  fuzz targets not built: no clang with libFuzzer"; fi

demo: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory -C examples BIN=$(abspath $(B))/bin OUT=$(abspath $(B))/demo

# Install, git-style: the tools keep their short names (train, runcard, ...) in
# PREFIX/libexec/lmt/, off PATH, and only the front end lmt (tools/lmt.c) goes in
# PREFIX/bin (`lmt train ...`, `lmt help train`, `lmt --list`); the pages go where
# man finds them. DESTDIR stages the tree elsewhere (packaging). uninstall removes
# exactly what install wrote (the names come from the sources, not the build).
#   make install [PREFIX=/usr/local] [DESTDIR=]     make uninstall (the same ones)
PREFIX ?= /usr/local
LIBEXECDIR = $(DESTDIR)$(PREFIX)/libexec/lmt
BINDIR = $(DESTDIR)$(PREFIX)/bin
MAN1DIR = $(DESTDIR)$(PREFIX)/share/man/man1
MAN5DIR = $(DESTDIR)$(PREFIX)/share/man/man5
INSTALL ?= install
LIBEXEC_TOOLS := $(filter-out lmt,$(TOOL_SRC:tools/%.c=%))
MAN1 := $(wildcard man/*.1)
MAN5 := $(wildcard man/*.5)
.PHONY: install uninstall
install: all
	$(INSTALL) -d $(LIBEXECDIR) $(BINDIR) $(MAN1DIR) $(MAN5DIR)
	$(INSTALL) -m 755 $(LIBEXEC_TOOLS:%=$(B)/bin/%) $(LIBEXECDIR)/
	$(INSTALL) -m 755 $(B)/bin/lmt $(BINDIR)/
	$(INSTALL) -m 644 $(MAN1) $(MAN1DIR)/
	$(INSTALL) -m 644 $(MAN5) $(MAN5DIR)/
uninstall:
	rm -f $(LIBEXEC_TOOLS:%=$(LIBEXECDIR)/%) $(BINDIR)/lmt \
		$(MAN1:man/%=$(MAN1DIR)/%) $(MAN5:man/%=$(MAN5DIR)/%)
	rmdir $(LIBEXECDIR) 2> /dev/null || true

clean:
	rm -rf $(B)
