/* Shared by the test programs: the conformance-vector runner and the unit tests. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "json.h"

extern int failures;
#define CHECK(condition, ...) do { if (!(condition)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

bool json_equal_text(const char *a, const char *b);
int run_unit_tests(void);
