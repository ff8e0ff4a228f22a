/* test_reply.c — the strict reply parser of the LLM mutator: whole files,
 * SEARCH/REPLACE edits, and every way a reply can be unusable. */
#include <stdlib.h>
#include <string.h>

#include "mutate/reply.h"
#include "test.h"

static const char parent[] = "#define CTAS 2\n"
                             "__global__ void k(float *x) {\n"
                             "    x[threadIdx.x] *= 2.0f;\n"
                             "}\n"
                             "int kevo_run(kevo_ctx *ctx) { return 0; }\n";

/* Applies reply to parent: 0 with *out, or 1 with the reason. */
static int apply(const char *reply, char **out, char *why)
{
    size_t len = 0;
    return kv_reply_apply(parent, strlen(parent), reply, out, &len, why, 256);
}

static void expect_source(const char *reply, const char *want)
{
    char *out = NULL, why[256];
    int rc = apply(reply, &out, why);
    KV_CHECKF(rc == 0, "refused: %s", why);
    if (rc == 0)
        KV_CHECKF(strcmp(out, want) == 0, "got:\n%s\nwant:\n%s", out, want);
    free(out);
}

static void expect_refused(const char *reply, const char *reason)
{
    char *out = NULL, why[256];
    int rc = apply(reply, &out, why);
    KV_CHECKF(rc == 1 && out == NULL, "rc %d", rc);
    KV_CHECK_STR_CONTAINS(why, reason);
    free(out);
}

static void test_whole_file(void)
{
    expect_source("Here is the kernel:\n```cuda\nint a;\nint b;\n```\nIt is faster.\n",
                  "int a;\nint b;\n");
    expect_source("```\nint a;\n```", "int a;\n");
    expect_source("```c++\nint a;\n```\n", "int a;\n");
    expect_source("```CUDA\nint a;\n```\n", "int a;\n");
    /* a block in another language is prose, not the file */
    expect_source("```bash\nnvcc x.cu\n```\n```cu\nint a;\n```\n", "int a;\n");
    /* CRLF replies */
    expect_source("```cuda\r\nint a;\r\nint b;\r\n```\r\n", "int a;\nint b;\n");
    expect_refused("Sorry, I cannot help with that.", "no code block and no SEARCH/REPLACE");
    expect_refused("```cuda\nint a;\n```\n```cuda\nint b;\n```\n", "2 code blocks");
    expect_refused("```cuda\nint a;\n", "not closed");
    expect_refused("```cuda\n   \n```\n", "the code block is empty");
}

static void test_edits(void)
{
    expect_source("<<<<<<< SEARCH\n#define CTAS 2\n=======\n#define CTAS 4\n>>>>>>> REPLACE\n",
                  "#define CTAS 4\n__global__ void k(float *x) {\n    x[threadIdx.x] *= 2.0f;\n"
                  "}\nint kevo_run(kevo_ctx *ctx) { return 0; }\n");
    /* two edits in order, inside a fence, CRLF, the second seeing the first's result */
    expect_source("```cuda\r\n<<<<<<< SEARCH\r\n    x[threadIdx.x] *= 2.0f;\r\n=======\r\n"
                  "    x[threadIdx.x] *= 3.0f;\r\n>>>>>>> REPLACE\r\n<<<<<<< SEARCH\r\n"
                  "*= 3.0f;\r\n}\r\n=======\r\n*= 4.0f;\r\n}\r\n>>>>>>> REPLACE\r\n```\r\n",
                  "#define CTAS 2\n__global__ void k(float *x) {\n    x[threadIdx.x] *= 4.0f;\n"
                  "}\nint kevo_run(kevo_ctx *ctx) { return 0; }\n");
    /* a deletion */
    expect_source("<<<<<<< SEARCH\n#define CTAS 2\n=======\n>>>>>>> REPLACE\n",
                  "__global__ void k(float *x) {\n    x[threadIdx.x] *= 2.0f;\n}\n"
                  "int kevo_run(kevo_ctx *ctx) { return 0; }\n");
    expect_refused("<<<<<<< SEARCH\n#define CTAS 8\n=======\n#define CTAS 4\n>>>>>>> REPLACE\n",
                   "does not occur in the source (it begins \"#define CTAS 8\")");
    expect_refused("<<<<<<< SEARCH\n}\n=======\n};\n>>>>>>> REPLACE\n", "occurs 2 times");
    expect_refused("<<<<<<< SEARCH\n=======\nint x;\n>>>>>>> REPLACE\n", "empty SEARCH");
    expect_refused("<<<<<<< SEARCH\n#define CTAS 2\n=======\n#define CTAS 4\n", "not closed");
    expect_refused("<<<<<<< SEARCH\n#define CTAS 2\n<<<<<<< SEARCH\n", "a new SEARCH begins");
    expect_refused("<<<<<<< SEARCH\n#define CTAS 2\n#define CTAS 2\n=======\nx\n>>>>>>> REPLACE\n",
                   "does not occur");
    /* the second edit sees the first's result: its SEARCH is gone */
    expect_refused("<<<<<<< SEARCH\n#define CTAS 2\n=======\n#define CTAS 4\n>>>>>>> REPLACE\n"
                   "<<<<<<< SEARCH\n#define CTAS 2\n=======\n#define CTAS 8\n>>>>>>> REPLACE\n",
                   "edit 2 (reply line 6): its SEARCH text does not occur");
    /* the whole file deleted */
    expect_refused("<<<<<<< SEARCH\n#define CTAS 2\n__global__ void k(float *x) {\n"
                   "    x[threadIdx.x] *= 2.0f;\n}\nint kevo_run(kevo_ctx *ctx) { return 0; }\n"
                   "=======\n>>>>>>> REPLACE\n",
                   "the edits leave an empty file");
    /* prose and a whole-file block around edits: the edits are what is used */
    expect_source("I changed CTAS.\n<<<<<<< SEARCH\n#define CTAS 2\n=======\n#define CTAS 3\n"
                  ">>>>>>> REPLACE\nFor reference:\n```cuda\nint unrelated;\n```\n",
                  "#define CTAS 3\n__global__ void k(float *x) {\n    x[threadIdx.x] *= 2.0f;\n"
                  "}\nint kevo_run(kevo_ctx *ctx) { return 0; }\n");
}

static void test_unended_last_line(void)
{
    const char p[] = "int a;\nint b;";
    char *out = NULL, why[256];
    size_t len = 0;
    int rc =
        kv_reply_apply(p, strlen(p), "<<<<<<< SEARCH\nint b;\n=======\nint c;\n>>>>>>> REPLACE\n",
                       &out, &len, why, sizeof why);
    KV_CHECKF(rc == 0, "%s", why);
    if (rc == 0)
        KV_CHECKF(strcmp(out, "int a;\nint c;\n") == 0 && len == strlen(out), "%s", out);
    free(out);
}

int main(void)
{
    KV_RUN(test_whole_file);
    KV_RUN(test_edits);
    KV_RUN(test_unended_last_line);
    return kv_test_summary();
}
