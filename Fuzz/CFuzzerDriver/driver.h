#pragma once
// libFuzzer's entry for programs that have their own main (compiler-rt's FuzzerInterface.h). SwiftPM gives an
// executable its own main (main.swift's code, through --defsym), which wins over libFuzzer's, so the fuzz
// executables hand over to libFuzzer with this. It exists only in programs linked with -sanitize=fuzzer: the
// fuzz executables call it only when built with -DFUZZING (Fuzz/run.sh), and link without libFuzzer otherwise.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
