/* test.h — the minimal test harness of kevo's C tests.
 *
 * A test file defines test functions and a main() that runs them with
 * KV_RUN(fn); KV_CHECK records a failure (with file, line and the expression)
 * and carries on; KV_REQUIRE returns from the current test function.
 * kv_test_summary() prints the closing line "N passed, N failed" (checks
 * counted) and returns the process exit code. */
#ifndef KEVO_TEST_H
#define KEVO_TEST_H

#include <stdio.h>
#include <string.h>

static int kv_test_passed, kv_test_failed;
static const char *kv_test_current = "";

#define KV_CHECK(cond)                                                                            \
    do {                                                                                          \
        if (cond) {                                                                               \
            kv_test_passed++;                                                                     \
        } else {                                                                                  \
            kv_test_failed++;                                                                     \
            fprintf(stderr, "FAIL %s (%s:%d): %s\n", kv_test_current, __FILE__, __LINE__, #cond); \
        }                                                                                         \
    } while (0)

#define KV_CHECKF(cond, ...)                                                                      \
    do {                                                                                          \
        if (cond) {                                                                               \
            kv_test_passed++;                                                                     \
        } else {                                                                                  \
            kv_test_failed++;                                                                     \
            fprintf(stderr, "FAIL %s (%s:%d): %s: ", kv_test_current, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
        }                                                                                         \
    } while (0)

#define KV_REQUIRE(cond)             \
    do {                             \
        int kv_ok_ = (cond) ? 1 : 0; \
        KV_CHECK(kv_ok_ &&#cond);    \
        if (!kv_ok_)                 \
            return;                  \
    } while (0)

static inline const char *kv_test_str(const char *s)
{
    return s ? s : "(null)";
}

#define KV_CHECK_STR_CONTAINS(hay, needle)                                                  \
    KV_CHECKF(strstr(kv_test_str(hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", \
              kv_test_str(hay), (needle))

#define KV_RUN(fn)             \
    do {                       \
        kv_test_current = #fn; \
        fn();                  \
    } while (0)

static inline int kv_test_summary(void)
{
    printf("%d passed, %d failed\n", kv_test_passed, kv_test_failed);
    return kv_test_failed == 0 && kv_test_passed > 0 ? 0 : 1;
}

#endif
