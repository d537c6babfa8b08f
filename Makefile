# xinfer build. `make` builds build/xinfer, `make test` runs every test,
# `make SAN=1 BUILD=build-asan test` runs them under ASan + UBSan.
CC      ?= cc
BUILD   ?= build
PKG_CONFIG ?= pkg-config
PKGS    := jansson libpcre2-8 libmicrohttpd gnutls libutf8proc libxxhash libcurl libcrypto yaml-0.1
OPT     ?= -O2
TRIPLE  := $(shell $(CC) -dumpmachine)

CFLAGS  += -std=c11 -D_GNU_SOURCE -g $(OPT) -Wall -Wextra -Werror -pthread \
           -Iinclude -Isrc $(shell $(PKG_CONFIG) --cflags $(PKGS))
LDLIBS  += $(shell $(PKG_CONFIG) --libs $(PKGS)) -lm -pthread
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

LIB_DIRS := src/base src/tensor src/kernels src/model src/model/arch src/tokenizer src/sample \
            src/engine src/api src/ops src/loadgen src/hub
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
ifneq (,$(findstring x86_64,$(TRIPLE)))
LIB_SRC  += $(wildcard src/kernels/x86/*.c)
endif
ifneq (,$(findstring aarch64,$(TRIPLE)))
LIB_SRC  += $(wildcard src/kernels/arm/*.c)
endif
SRV_SRC  := $(wildcard src/server/*.c)
CLI_SRC  := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/*.c tests/hub/*.c)
TOOL_SRC := $(wildcard tools/*.c)
BENCH_SRC := $(wildcard bench/*.c)

comma := ,
obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
LIB := $(BUILD)/libxinfer.a
BIN := $(BUILD)/xinfer
TESTBIN := $(BUILD)/xinfer_tests
TOOLS := $(patsubst tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

# ISA-specific kernels: the file name says which instructions it may use.
$(BUILD)/src/kernels/x86/avx2%.o:   XFLAGS := -mavx2 -mfma -mf16c
# GCC's pre-allocation scheduler with register pressure: the integer GGML tiles (each its own
# function, avx2_gq.c) otherwise spill their accumulators (512-row Q4_0 / Q5_0 20% faster).
ifeq (,$(findstring clang,$(shell $(CC) --version 2>/dev/null)))
$(BUILD)/src/kernels/x86/avx2_gq.o: XFLAGS += -fschedule-insns -fsched-pressure
endif
$(BUILD)/src/kernels/x86/avx512%.o: XFLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
$(BUILD)/src/kernels/x86/avx512_bf16.o: XFLAGS += -mavx512bf16
$(BUILD)/src/kernels/arm/neon%.o:   XFLAGS := -march=armv8.2-a+fp16+dotprod

# The MPI plugin for -tp > 1 (src/comm/), built when OpenMPI's development files are there;
# build/xinfer itself never links MPI and dlopens it only for -tp > 1.
# MPI_SYSROOT: a folder holding the target's OpenMPI (Debian's libopenmpi-dev and libopenmpi3
# packages extracted there, not installed), for a cross-built plugin.
ifneq ($(MPI_SYSROOT),)
MPI_FLAGS := -I$(MPI_SYSROOT)/usr/lib/$(TRIPLE)/openmpi/include $(MPI_SYSROOT)/usr/lib/$(TRIPLE)/libmpi.so.40
else
MPI_FLAGS := $(shell $(PKG_CONFIG) --cflags --libs ompi-c 2>/dev/null)
endif
MPI_PLUGIN := $(if $(MPI_FLAGS),$(BUILD)/xinfer-mpi.so)

all: $(BIN) $(TOOLS) $(MPI_PLUGIN)

$(BUILD)/xinfer-mpi.so: src/comm/mpi_plugin.c src/base/comm.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared -o $@ $< $(MPI_FLAGS) $(LDFLAGS)

# `xinfer --version`: the commit and date go to one object, rebuilt when the commit (or the
# kind of build) changes.
GIT_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
$(BUILD)/src/api/build_info.o: XFLAGS := -DXI_GIT_COMMIT='"$(GIT_COMMIT)"' -DXI_BUILD_DATE='"$(BUILD_DATE)"'
$(BUILD)/src/api/build_info.o: $(BUILD)/commit.stamp
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(BUILD) && echo '$(GIT_COMMIT) $(STATIC)' | cmp -s - $@ || echo '$(GIT_COMMIT) $(STATIC)' >$@

# ---- release build: `make STATIC=1 BUILD=build-static` runs on glibc 2.28 and later --------
# Debian's static archives are linked in; libcurl is opened when first used
# (src/dist/curl_dlopen.c), and so is GnuTLS for libmicrohttpd's TLS hooks and --ssl-*
# (src/dist/tls_dlopen.c); every glibc symbol newer than 2.28 is bound to its old version
# through --wrap (src/dist/glibc228.c). Needs nothing but libc, libm, libpthread and libdl.
ifeq ($(STATIC),1)
DIST_OBJ   := $(call obj,$(wildcard src/dist/*.c))
GLIBC_PINS := $(shell sed -En 's/^ *PIN.([a-z_0-9]+),.*/\1/p' src/dist/glibc228.c) \
              __libc_start_main stat lstat fstat
LDLIBS     := -Wl,-Bstatic -ljansson -lpcre2-8 -lmicrohttpd -lutf8proc -lxxhash \
              -lcrypto -lyaml -Wl,-Bdynamic -Wl,--no-as-needed -lm -l:libpthread.so.0 -l:libdl.so.2 \
              $(addprefix -Wl$(comma)--wrap=,$(GLIBC_PINS))
$(BUILD)/src/api/build_info.o: XFLAGS += -DXI_STATIC_RELEASE
$(BIN) $(TESTBIN) $(TOOLS) $(BENCHES): $(DIST_OBJ)
endif

# ---- make dist: .deb, .rpm and .tar.gz for x86-64 and aarch64 (packaging/dist.sh) --------
# aarch64 is cross-built with gcc-aarch64-linux-gnu and Debian's arm64 -dev packages.
VERSION  := $(shell sed -n 's/^\#define XINFER_VERSION "\(.*\)"/\1/p' include/xinfer.h)
DIST_DIR ?= dist
# The MPI plugin goes in too: x86-64's from the installed OpenMPI, aarch64's when
# MPI_ARM64_SYSROOT names Debian's arm64 OpenMPI packages extracted (.ci/packaging.sh does it).
MPI_ARM64_SYSROOT ?=
dist:
	$(MAKE) STATIC=1 BUILD=build-static build-static/xinfer $(if $(MPI_FLAGS),build-static/xinfer-mpi.so)
	PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig $(MAKE) STATIC=1 \
	  CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar BUILD=build-static-arm64 build-static-arm64/xinfer \
	  $(if $(MPI_ARM64_SYSROOT),MPI_SYSROOT=$(MPI_ARM64_SYSROOT) build-static-arm64/xinfer-mpi.so)
	packaging/dist.sh $(VERSION) x86_64 build-static/xinfer $(DIST_DIR)
	packaging/dist.sh $(VERSION) aarch64 build-static-arm64/xinfer $(DIST_DIR)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(XFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(call obj,$(LIB_SRC))
	@rm -f $@
	$(AR) rcs $@ $^

# The web UI: web/'s files as C arrays (raw and gzip'ed) for src/server/webui.c.
WEB_SRC := $(sort $(wildcard web/*))
WEB_OBJ := $(BUILD)/gen/webui_assets.o
$(BUILD)/gen/webui_assets.c: $(WEB_SRC) web tools/embed_web.sh
	@mkdir -p $(dir $@)
	sh tools/embed_web.sh $(WEB_SRC) > $@.tmp && mv $@.tmp $@
$(WEB_OBJ): $(BUILD)/gen/webui_assets.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BIN): $(call obj,$(CLI_SRC) $(SRV_SRC)) $(WEB_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The AVX-512 kernels once more, for the test binary only (never the library or the server):
# through SIMDe's portable AVX-512 (Debian's libsimde-dev) with AVX2, so their bits are checked
# on machines without AVX-512 (tests/test_kernels_gq_avx512.c, test_kernels_avx512_matmul.c,
# and test_kernels_qdot.c / gq_pack.c through kernel_util.c's int8 variants; skipped without
# SIMDe).
ifneq (,$(findstring x86_64,$(TRIPLE)))
ifneq (,$(wildcard /usr/include/simde/x86/avx512.h))
EMU_OBJ := $(BUILD)/tests/emu/avx512_gq_emulated.o $(BUILD)/tests/emu/avx512_qdot_emulated.o \
           $(BUILD)/tests/emu/avx512_matmul_emulated.o
$(BUILD)/tests/emu/avx512_%_emulated.o: src/kernels/x86/avx512_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DXI_AVX512_EMULATED -mavx2 -mfma -mf16c -Wno-psabi -MMD -MP -c $< -o $@
$(BUILD)/tests/test_kernels_gq_avx512.o $(BUILD)/tests/kernel_util.o \
  $(BUILD)/tests/test_kernels_avx512_matmul.o: XFLAGS := -DXI_TEST_AVX512_EMULATED
endif
endif

$(TESTBIN): $(call obj,$(TEST_SRC) $(SRV_SRC)) $(EMU_OBJ) $(WEB_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tools/%: $(BUILD)/tools/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Tests find the shared data through XINFER_TEST_DATA and the CLI through XINFER_BIN.
XINFER_TEST_DATA ?= ../shared/data
test: $(BIN) $(TESTBIN) $(TOOLS) $(MPI_PLUGIN)
	XINFER_TEST_DATA=$(XINFER_TEST_DATA) XINFER_BIN=$(BIN) XINFER_TOOLS=$(BUILD)/tools \
	  $(TESTBIN) $(T)

bench: $(BENCHES) $(TOOLS) $(BIN)

# Mixed streaming load with disconnects and slow sockets for SOAK_SECONDS, RSS and descriptors
# sampled, a verdict at the end (CI runs 60 s).
SOAK_SECONDS ?= 300
soak: $(BIN)
	XINFER_TEST_DATA=$(XINFER_TEST_DATA) node tests/soak/soak.mjs --bin $(BIN) --seconds $(SOAK_SECONDS)

clean:
	rm -rf $(BUILD)

.PHONY: all test bench soak clean dist FORCE
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
