# cis2 - GNU Makefile.
#
#   make                      build build/cis2, build/libcis2.a and build/libcis2.so
#   make -j2 check            build and run every test (tests/run.sh), two
#                             at a time (ONLY=name: those whose name
#                             contains it; JOBS=N: N at a time)
#   make check-cross          the aarch64 leg under qemu (tests/cross/)
#   make matrix               every compiler x optimisation x ISA cell (tools/matrix)
#   make run                  the main job (README)
#   make install PREFIX=DIR   binary, library, header, pkg-config file
#   make CC=clang OPT=-O0     any compiler / optimisation; the target ISA is
#                             taken from `$(CC) -dumpmachine`, never uname.
#   make check SAN=1 BUILD=build-san   the tests under ASan+UBSan
#   make tsan                 the concurrency tests under ThreadSanitizer
#   make fuzz [FUZZ_SECONDS=60]       libFuzzer targets (fuzz/), each that long
#
# Float rules (spec §1.4, §1.5): -ffp-contract=off and -fno-fast-math on
# every compile line, gcc's -fexcess-precision=standard; never -Ofast or
# -ffast-math.  tools/check-no-fma verifies the result.

CC ?= cc
OPT ?= -O2
BUILD ?= build
PREFIX ?= /usr/local
SAN ?=

TRIPLE := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq ($(findstring x86_64,$(TRIPLE)),)
  ARCH := x86_64
else ifneq ($(findstring aarch64,$(TRIPLE)),)
  ARCH := aarch64
else
  $(error cis2: unsupported target '$(TRIPLE)' from $(CC) -dumpmachine (CIS-2 §1.3 defines x86-64 and aarch64 only))
endif
IS_CLANG := $(shell $(CC) --version 2>/dev/null | grep -qi clang && echo 1)

FPFLAGS := -ffp-contract=off -fno-fast-math -fno-math-errno
ifneq ($(IS_CLANG),1)
  FPFLAGS += -fexcess-precision=standard
endif
ifeq ($(SAN),1)
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
endif
ifeq ($(SAN),thread)
  SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
endif
WARN := -Wall -Wextra -Wno-unused-parameter
CFLAGS_ALL := -std=c11 $(FPFLAGS) $(OPT) -g $(WARN) -D_DEFAULT_SOURCE -Iinclude \
              -pthread $(SANFLAGS) $(CFLAGS)
LDLIBS_ALL := -lcrypto -ljansson -lpthread $(LDLIBS)
LDFLAGS_ALL := -pthread $(SANFLAGS) $(LDFLAGS)

# aarch64 cross builds (docs/cross-isa.md).  tools/install-deps unpacks the
# arm64 libcrypto/jansson/cmocka .debs into AARCH64_DEPS instead of
# installing them as multiarch packages: libc6:arm64 would then shadow the
# cross libc under `qemu-aarch64-static -L /usr/aarch64-linux-gnu` and hang
# every threaded program (ld.so and libc from different builds).  libcrypto
# and jansson are linked statically; cmocka (no .a) is found through rpath.
# RUNNER prefixes every target binary `make check` runs: qemu when the
# target ISA differs from the host's (uname is only asked about the host).
AARCH64_DEPS ?= /opt/cis2-aarch64-deps
ifeq ($(ARCH),aarch64)
  ifneq ($(wildcard $(AARCH64_DEPS)/usr/include/jansson.h),)
    DEPLIB := $(AARCH64_DEPS)/usr/lib/aarch64-linux-gnu
    CFLAGS_ALL += -isystem $(AARCH64_DEPS)/usr/include -isystem $(AARCH64_DEPS)/usr/include/aarch64-linux-gnu
    LDFLAGS_ALL += -L$(DEPLIB) -Wl,-rpath,$(DEPLIB)
    LDLIBS_ALL := -Wl,-Bstatic -lcrypto -ljansson -Wl,-Bdynamic -lpthread $(LDLIBS)
  endif
endif
# The public libraries export the cis2_* API of include/cis2.h only: every
# library object is compiled with -fvisibility=hidden (CIS2_API marks the
# API), libcis2.so is linked from them, and libcis2.a is one relocatable
# object with the hidden symbols made local (objcopy --localize-hidden).
# The tests link the internal archive, which keeps every symbol.
ifeq ($(ARCH),aarch64)
  OBJCOPY ?= aarch64-linux-gnu-objcopy
else
  OBJCOPY ?= objcopy
endif
SONAME := libcis2.so.0
LIBFLAGS := -fPIC -fvisibility=hidden

ifneq ($(ARCH),$(shell uname -m))
  ifeq ($(ARCH),aarch64)
    RUNNER ?= qemu-aarch64-static -L /usr/aarch64-linux-gnu
  endif
endif
RUNNER ?=

# Sources by folder (docs/architecture.md): the engine library is src/
# (its ISA kernels in src/kernels/, only this target's: kern_x86_*.c on
# x86-64, kern_neon*.c on aarch64; generated tables in src/tables/); the
# `cis2` program is cli/ and serve/, compiled with only include/ on their
# include path, so that they are clients of the public API is a property
# of the build, not a convention.
ifeq ($(ARCH),x86_64)
  KERN_SRC := $(wildcard src/kernels/kern_x86_*.c)
else
  KERN_SRC := $(wildcard src/kernels/kern_neon*.c)
endif
LIB_SRC := $(wildcard src/*.c) $(KERN_SRC) $(wildcard src/tables/*.c)
CLI_SRC := $(wildcard cli/*.c) $(wildcard serve/*.c)
LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))
# SIMD flags only for the files that need them (never -mfma).
$(BUILD)/obj/src/kernels/kern_x86_avx2.o: XFLAGS := -mavx2
$(BUILD)/obj/src/kernels/kern_x86_avx512.o: XFLAGS := -mavx512f -mavx512bw -mavx512vl -mavx2

TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))

.PHONY: all check check-cross run install clean tests fuzz fuzz-build tsan FORCE
all: $(BUILD)/cis2 $(BUILD)/libcis2.a $(BUILD)/libcis2.so

# Rebuild everything when the compiler or flags change.
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)/obj $(BUILD)/tests
	@echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $(LDLIBS_ALL)' | cmp -s - $@ || \
	  echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $(LDLIBS_ALL)' > $@

$(LIB_OBJ): LIBF := $(LIBFLAGS) -Isrc
$(BUILD)/obj/src/%.o: src/%.c $(BUILD)/.flags $(wildcard src/*.h src/*/*.h) $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(LIBF) $(XFLAGS) -c $< -o $@
# the program: include/ only
$(BUILD)/obj/cli/%.o: cli/%.c $(BUILD)/.flags cli/cli.h $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(XFLAGS) -c $< -o $@
$(BUILD)/obj/serve/%.o: serve/%.c $(BUILD)/.flags $(wildcard serve/*.h) cli/cli.h $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(XFLAGS) -c $< -o $@

# every symbol: for the unit tests and fuzz targets
$(BUILD)/libcis2-internal.a: $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/obj/libcis2-public.o: $(LIB_OBJ)
	$(CC) -r -nostdlib -o $@ $^
	$(OBJCOPY) --localize-hidden $@

$(BUILD)/libcis2.a: $(BUILD)/obj/libcis2-public.o
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/libcis2.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,defs $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# `cis2 serve` (serve/serve_*.c) links GNU libmicrohttpd into the binary only,
# never the libraries; a target that cannot link it (the aarch64 cross
# build) gets a serve that says so.
HAVE_MHD := $(shell printf '\043include <microhttpd.h>\nint main(void) { return MHD_get_version() == 0; }\n' | \
              $(CC) -x c - -o /dev/null -lmicrohttpd > /dev/null 2>&1 && echo 1)
ifeq ($(HAVE_MHD),1)
  $(BUILD)/obj/serve/serve_http.o: XFLAGS := -DCIS2_HAVE_MHD
  CLI_LDLIBS := -lmicrohttpd
endif
$(BUILD)/.mhd: FORCE
	@mkdir -p $(BUILD)
	@echo '$(HAVE_MHD)' | cmp -s - $@ || echo '$(HAVE_MHD)' > $@
$(BUILD)/obj/serve/serve_http.o: $(BUILD)/.mhd

# the CLI sees the public archive only: nothing but the API links
$(BUILD)/cis2: $(CLI_OBJ) $(BUILD)/libcis2.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CLI_LDLIBS) $(LDLIBS_ALL)

# unit tests (tests/unit/) reach into the engine: src/ and the internal archive
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libcis2-internal.a $(wildcard tests/unit/*.h)
	$(CC) $(CFLAGS_ALL) -Isrc -Itests/unit -o $@ $< $(BUILD)/libcis2-internal.a $(LDFLAGS_ALL) -lcmocka $(LDLIBS_ALL) -lm

# the server's modules are compiled into their unit tests (the server is not in the library)
$(BUILD)/tests/test_serve_buf: serve/serve_buf.c serve/serve.h
$(BUILD)/tests/test_serve_parse: serve/serve_parse.c serve/serve_parse.h serve/serve_buf.c serve/serve.h

tests: all $(TEST_BIN)

# tests/run.sh takes make's -jN as its number of tests at a time (JOBS=N
# says it outright); SET=san is the sanitizer leg's set (docs/building.md).
check: tests
	BUILD=$(BUILD) SAN="$(SAN)" CC="$(CC)" OPT="$(OPT)" ARCH=$(ARCH) RUNNER="$(RUNNER)" \
	  SET="$(SET)" JOBS="$(JOBS)" sh tests/run.sh

# The aarch64 leg (tests/cross/, docs/cross-isa.md): a cross build run under
# qemu whose receipts must equal this build's byte for byte.  Needs
# `sh tools/install-deps all`; CI runs it beside `make check`.
check-cross: all
	BUILD=$(BUILD) KINDS=cross sh tests/run.sh

run: all
	sh tools/run-main

# One engine's every public call against every other under ThreadSanitizer
# (docs/building.md "Sanitizers, threads and fuzzing"):
# tests/unit/test_concurrency.c, and the library's own unit tests of threads
# (test_engine), in their own build dir; any report fails it.
TSAN_BUILD ?= build/tsan
tsan:
	$(MAKE) SAN=thread BUILD=$(TSAN_BUILD) $(TSAN_BUILD)/tests/test_concurrency $(TSAN_BUILD)/tests/test_engine
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" $(TSAN_BUILD)/tests/test_concurrency
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" $(TSAN_BUILD)/tests/test_engine

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BUILD)/cis2 $(DESTDIR)$(PREFIX)/bin/cis2
	install -m 644 $(BUILD)/libcis2.a $(DESTDIR)$(PREFIX)/lib/libcis2.a
	install -m 755 $(BUILD)/libcis2.so $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libcis2.so
	install -m 644 include/cis2.h $(DESTDIR)$(PREFIX)/include/cis2.h
	install -m 644 include/cis2_toolkit.h $(DESTDIR)$(PREFIX)/include/cis2_toolkit.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/.*CIS2_VERSION "\(.*\)"/\1/p' include/cis2.h)|g' \
	  cis2.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cis2.pc


# ---- libFuzzer targets (fuzz/; docs/building.md "Sanitizers, threads and fuzzing", docs/inputs.md) ----
# The library sources are compiled once more with clang and
# -fsanitize=fuzzer-no-link,address,undefined into $(FUZZ_OUT)/libcis2-fuzz.a;
# each fuzz/fuzz_NAME.c links against it with -fsanitize=fuzzer (the linker
# pulls in only the modules the target reaches).  `make fuzz` runs each for
# FUZZ_SECONDS on a scratch copy of its seed corpus fuzz/corpus/NAME/ (the
# repo's seeds are never modified), with the dictionary fuzz/NAME.dict where
# there is one; a finding leaves crash-* files in $(FUZZ_OUT)/artifacts/.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_OUT ?= $(BUILD)/fuzz
FUZZ_NAMES := safetensors config tokenizer_load tokenizer_encode receipt prompts shards jinja
FUZZ_BIN := $(patsubst %,$(FUZZ_OUT)/fuzz_%,$(FUZZ_NAMES))
FUZZ_BASE := -std=c11 -ffp-contract=off -fno-fast-math -fno-math-errno -O1 -g $(WARN) -D_DEFAULT_SOURCE \
             -Iinclude -Isrc -pthread -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := $(FUZZ_BASE) -fsanitize=fuzzer,address,undefined
FUZZ_OBJ := $(patsubst %.c,$(FUZZ_OUT)/obj/%.o,$(LIB_SRC))
$(FUZZ_OUT)/obj/src/kernels/kern_x86_avx2.o: XFLAGS := -mavx2
$(FUZZ_OUT)/obj/src/kernels/kern_x86_avx512.o: XFLAGS := -mavx512f -mavx512bw -mavx512vl -mavx2

$(FUZZ_OUT)/obj/%.o: %.c $(wildcard src/*.h src/*/*.h) $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_BASE) -fsanitize=fuzzer-no-link,address,undefined $(XFLAGS) -c $< -o $@
# The ISA kernels (src/kernels/) are reached by no fuzz target (loaders and
# parsers only: no forward pass), and clang's ASan+UBSan+coverage of the
# AVX-512 file alone took minutes at -O1: they are built uninstrumented
# (the sanitizer leg, make check SAN=1, runs them instrumented).
$(FUZZ_OUT)/obj/src/kernels/%.o: src/kernels/%.c $(wildcard src/*.h src/*/*.h) $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_BASE) $(XFLAGS) -c $< -o $@

$(FUZZ_OUT)/libcis2-fuzz.a: $(FUZZ_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_OUT)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_util.h $(FUZZ_OUT)/libcis2-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_OUT)/libcis2-fuzz.a -lcrypto -ljansson -lpthread

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@fail=""; for n in $(FUZZ_NAMES); do \
	  work=$$(mktemp -d); mkdir -p $(FUZZ_OUT)/artifacts; \
	  cp fuzz/corpus/$$n/* "$$work"/ 2>/dev/null; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  dict=""; [ -f fuzz/$$n.dict ] && dict=-dict=fuzz/$$n.dict; \
	  SHARED=$${SHARED:-../shared} $(FUZZ_OUT)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 $$dict \
	    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_OUT)/artifacts/$$n- "$$work" > $(FUZZ_OUT)/$$n.log 2>&1 \
	    || { fail="$$fail $$n"; tail -n 40 $(FUZZ_OUT)/$$n.log; }; \
	  grep -E '^stat::number_of_executed_units|^Done' $(FUZZ_OUT)/$$n.log | tr '\n' ' '; echo; \
	  rm -rf "$$work"; \
	done; \
	if [ -n "$$fail" ]; then echo "fuzz: FAILED:$$fail (inputs in $(FUZZ_OUT)/artifacts/)"; exit 1; fi; \
	echo "fuzz: all targets clean"

# Every compiler x optimisation x ISA cell must print the same CIS2_REFs
# (tools/matrix, docs/cross-isa.md); MATRIX="cell ..." runs a subset.
.PHONY: matrix
matrix:
	sh tools/matrix

clean:
	rm -rf $(BUILD)
