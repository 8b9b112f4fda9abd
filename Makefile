# cis2 - GNU Makefile.
#
#   make                      build build/cis2 and build/libcis2.a
#   make check                build and run every test (tests/run.sh)
#   make run                  the main job (README)
#   make install PREFIX=DIR   binary, library, header, pkg-config file
#   make CC=clang OPT=-O0     any compiler / optimisation; the target ISA is
#                             taken from `$(CC) -dumpmachine`, never uname.
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
WARN := -Wall -Wextra -Wno-unused-parameter
CFLAGS_ALL := -std=c11 $(FPFLAGS) $(OPT) -g $(WARN) -D_DEFAULT_SOURCE -Iinclude -Isrc \
              -pthread $(SANFLAGS) $(CFLAGS)
LDLIBS_ALL := -lcrypto -ljansson -lpthread $(LDLIBS)
LDFLAGS_ALL := -pthread $(SANFLAGS) $(LDFLAGS)

# Per-ISA kernel files: src/kern_x86_*.c on x86-64, src/kern_neon*.c on aarch64.
ALL_SRC := $(wildcard src/*.c)
X86_SRC := $(wildcard src/kern_x86_*.c)
ARM_SRC := $(wildcard src/kern_neon*.c)
CLI_SRC := src/main.c $(wildcard src/cli_*.c)
ifeq ($(ARCH),x86_64)
  LIB_SRC := $(filter-out $(CLI_SRC) $(ARM_SRC),$(ALL_SRC))
else
  LIB_SRC := $(filter-out $(CLI_SRC) $(X86_SRC),$(ALL_SRC))
endif
LIB_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC))
CLI_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRC))
# SIMD flags only for the files that need them (never -mfma).
$(BUILD)/obj/kern_x86_avx2.o: XFLAGS := -mavx2
$(BUILD)/obj/kern_x86_avx512.o: XFLAGS := -mavx512f -mavx512bw -mavx512vl -mavx2

TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))

.PHONY: all check run install clean tests FORCE
all: $(BUILD)/cis2 $(BUILD)/libcis2.a

# Rebuild everything when the compiler or flags change.
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)/obj $(BUILD)/tests
	@echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $(LDLIBS_ALL)' | cmp -s - $@ || \
	  echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) $(LDLIBS_ALL)' > $@

$(BUILD)/obj/%.o: src/%.c $(BUILD)/.flags $(wildcard src/*.h) include/cis2.h
	$(CC) $(CFLAGS_ALL) $(XFLAGS) -c $< -o $@

$(BUILD)/libcis2.a: $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/cis2: $(CLI_OBJ) $(BUILD)/libcis2.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libcis2.a $(wildcard tests/*.h)
	$(CC) $(CFLAGS_ALL) -Itests -o $@ $< $(BUILD)/libcis2.a $(LDFLAGS_ALL) -lcmocka $(LDLIBS_ALL)

tests: all $(TEST_BIN)

check: tests
	BUILD=$(BUILD) CC="$(CC)" OPT="$(OPT)" ARCH=$(ARCH) sh tests/run.sh

run: all
	sh tools/run-main

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BUILD)/cis2 $(DESTDIR)$(PREFIX)/bin/cis2
	install -m 644 $(BUILD)/libcis2.a $(DESTDIR)$(PREFIX)/lib/libcis2.a
	install -m 644 include/cis2.h $(DESTDIR)$(PREFIX)/include/cis2.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/.*CIS2_VERSION "\(.*\)"/\1/p' include/cis2.h)|g' \
	  cis2.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cis2.pc

clean:
	rm -rf $(BUILD)
