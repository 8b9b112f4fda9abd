/*
 * fuzz_driver.c - a plain main() for the libFuzzer targets of fuzz/, so
 * that `make check` (tests/build/t_fuzz_targets.sh) compiles every target
 * with the ordinary compiler against the internal archive and runs it on
 * its seed corpus: a target that no longer builds against the library's
 * API, or a seed that aborts, fails there instead of in CI's fuzzing leg
 * (which needs clang's libFuzzer and runs last).  Each argument is a file,
 * given whole to LLVMFuzzerTestOneInput, after LLVMFuzzerInitialize where
 * the target defines one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); return 2; }
        size_t cap = 1 << 16, n = 0;
        uint8_t *buf = malloc(cap);
        size_t r;
        while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
            n += r;
            if (n == cap) buf = realloc(buf, cap *= 2);
        }
        fclose(f);
        if (!buf) { fprintf(stderr, "out of memory reading %s\n", argv[i]); return 2; }
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
    }
    printf("%d input(s) run\n", argc - 1);
    return 0;
}
