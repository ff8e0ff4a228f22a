/* export_write.c — kevo export's files, from a plan (export_write.h). */
#include "report/export_write.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include "report/views.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "common/strbuf.h"

#ifndef KEVO_VERSION
#define KEVO_VERSION "0.0.0"
#endif

void kv_export_ident(const char *problem, char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return;
    if (isdigit((unsigned char)problem[0]) && n + 1 < cap)
        out[n++] = 'p';
    for (const char *s = problem; *s && n + 1 < cap; s++)
        out[n++] = isalnum((unsigned char)*s) ? *s : '_';
    out[n] = 0;
}

/* ---- templates ------------------------------------------------------------------------ */

typedef struct {
    const char *key; /* "P" for @P@ */
    const char *val;
} subst;

/* tmpl with every @KEY@ of subs replaced (an '@' that starts no key is kept). */
static void expand(kv_strbuf *b, const char *tmpl, const subst *subs, int n)
{
    for (const char *s = tmpl; *s;) {
        const char *at = strchr(s, '@');
        if (!at) {
            kv_sb_puts(b, s);
            return;
        }
        kv_sb_put(b, s, (size_t)(at - s));
        int hit = -1;
        for (int i = 0; i < n && hit < 0; i++) {
            size_t k = strlen(subs[i].key);
            if (strncmp(at + 1, subs[i].key, k) == 0 && at[1 + k] == '@')
                hit = i;
        }
        if (hit < 0) {
            kv_sb_put(b, "@", 1);
            s = at + 1;
            continue;
        }
        kv_sb_puts(b, subs[hit].val);
        s = at + 2 + strlen(subs[hit].key);
    }
}

/* ---- the problem's tensors as C++ (the harness) ------------------------------------------ */

static const char *const dtype_enum[KEVO_DTYPE_COUNT] = {
    [KEVO_BF16] = "KEVO_BF16", [KEVO_F16] = "KEVO_F16", [KEVO_F32] = "KEVO_F32",
    [KEVO_I32] = "KEVO_I32",   [KEVO_I64] = "KEVO_I64", [KEVO_FP8_E4M3] = "KEVO_FP8_E4M3",
};

/* A problem expression (common/expr.h: integers, + - * / % ( ), min, max,
 * ceil_div, the params and W) as C over p[] and w. */
static int c_expr(kv_strbuf *b, const char *expr, const kv_problem *def, kv_err *err)
{
    kv_sb_puts(b, "(int64_t)(");
    for (const char *s = expr; *s;) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *e = s;
            while (isalnum((unsigned char)*e) || *e == '_')
                e++;
            size_t n = (size_t)(e - s);
            int param = -1;
            for (int i = 0; i < def->n_params && param < 0; i++)
                if (strlen(def->param_names[i]) == n && strncmp(def->param_names[i], s, n) == 0)
                    param = i;
            if (param >= 0)
                kv_sb_printf(b, "p[%d]", param);
            else if (n == 1 && *s == 'W')
                kv_sb_puts(b, "w");
            else if ((n == 3 && strncmp(s, "min", 3) == 0) ||
                     (n == 3 && strncmp(s, "max", 3) == 0) ||
                     (n == 8 && strncmp(s, "ceil_div", 8) == 0))
                kv_sb_printf(b, "kx_%.*s", (int)n, s);
            else
                return kv_err_set(err, "%s: expression '%s': unknown name '%.*s'", def->dir, expr,
                                  (int)n, s);
            s = e;
        } else {
            kv_sb_put(b, s, 1);
            s++;
        }
    }
    kv_sb_puts(b, ")");
    return 0;
}

static int tensor_specs(kv_strbuf *b, const char *what, const kv_tensor_spec *t, int n)
{
    kv_sb_printf(b, "const TensorSpec %s[%d] = {\n", what, n > 0 ? n : 1);
    for (int i = 0; i < n; i++) {
        if ((unsigned)t[i].dtype >= KEVO_DTYPE_COUNT)
            return -1;
        kv_sb_printf(b, "    {\"%s\", %s, %d},\n", t[i].name, dtype_enum[t[i].dtype], t[i].ndim);
    }
    if (n == 0)
        kv_sb_puts(b, "    {\"\", KEVO_BF16, 0},\n");
    kv_sb_puts(b, "};\n");
    return 0;
}

/* kParamNames, kInputs, kOutputs, shapes() and scratch_wanted() of the harness. */
static int harness_specs(kv_strbuf *b, const kv_problem *def, kv_err *err)
{
    kv_sb_printf(b, "// ---- problem %s (%s/problem.json) ----\n\n", def->name, def->dir);
    kv_sb_printf(b, "constexpr int kParamCount = %d;\n", def->n_params);
    kv_sb_printf(b, "const char *const kParamNames[%d] = {", def->n_params > 0 ? def->n_params : 1);
    for (int i = 0; i < def->n_params; i++)
        kv_sb_printf(b, "%s\"%s\"", i ? ", " : "", def->param_names[i]);
    kv_sb_puts(b, def->n_params ? "};\n" : "\"\"};\n");
    kv_sb_printf(b, "constexpr int kInputCount = %d, kOutputCount = %d;\n", def->n_inputs,
                 def->n_outputs);
    if (tensor_specs(b, "kInputs", def->inputs, def->n_inputs) != 0 ||
        tensor_specs(b, "kOutputs", def->outputs, def->n_outputs) != 0)
        return kv_err_set(err, "%s: a tensor of an unknown type", def->dir);
    kv_sb_puts(b, "\n// Every tensor's shape at params p (in kParamNames' order) and world w.\n"
                  "void shapes(const int64_t *p, int64_t w, Shapes *s)\n{\n"
                  "    (void)p;\n    (void)w;\n");
    for (int k = 0; k < def->n_inputs + def->n_outputs; k++) {
        int out = k >= def->n_inputs, i = out ? k - def->n_inputs : k;
        const kv_tensor_spec *t = out ? &def->outputs[i] : &def->inputs[i];
        for (int d = 0; d < t->ndim; d++) {
            kv_sb_printf(b, "    s->%s[%d][%d] = ", out ? "out" : "in", i, d);
            if (c_expr(b, t->shape[d], def, err) != 0)
                return -1;
            kv_sb_printf(b, "; // %s: %s\n", t->name, t->shape[d]);
        }
    }
    kv_sb_puts(b, "}\n\n"
                  "// The symmetric scratch the problem asks for (problem.json's scratch_bytes).\n"
                  "int64_t scratch_wanted(const int64_t *p, int64_t w)\n{\n"
                  "    (void)p;\n    (void)w;\n    return ");
    if (def->scratch_bytes[0]) {
        if (c_expr(b, def->scratch_bytes, def, err) != 0)
            return -1;
    } else {
        kv_sb_puts(b, "0");
    }
    kv_sb_puts(b, ";\n}\n");
    return 0;
}

/* ---- the table ------------------------------------------------------------------------- */

static void fmt_bound(uint64_t v, char *out, size_t cap)
{
    if (v == KV_EXPORT_NO_LIMIT)
        snprintf(out, cap, "no limit");
    else
        snprintf(out, cap, "%" PRIu64, v);
}

/* The table as a comment (prefix " * ") or as Markdown. */
static void table_text(kv_strbuf *b, const kv_export_plan *plan, int markdown)
{
    if (markdown)
        kv_sb_puts(b, "| size | input bytes per rank | takes calls of bytes in | program | "
                      "speedup | program µs | reference µs | cell |\n"
                      "| --- | ---: | --- | --- | ---: | ---: | ---: | --- |\n");
    else
        kv_sb_printf(b, " *   %-14s %14s   %-32s %9s %8s %12s %12s  %s\n", "size", "bytes",
                     "takes calls of bytes in", "program", "speedup", "program us", "reference us",
                     "cell");
    for (int r = 0; r < plan->n_rows; r++) {
        const kv_export_row *row = &plan->rows[r];
        char lo[32], hi[32], range[80], id[32], sp[32];
        fmt_bound(row->lo, lo, sizeof lo);
        fmt_bound(row->hi, hi, sizeof hi);
        if (row->hi == KV_EXPORT_NO_LIMIT)
            snprintf(range, sizeof range, "[%s, no limit)", lo);
        else
            snprintf(range, sizeof range, "[%s, %s)", lo, hi);
        snprintf(id, sizeof id, "#%" PRIu64, row->best.program_id);
        kv_fmt_speedup(row->best.speedup, sp, sizeof sp);
        if (markdown)
            kv_sb_printf(b,
                         "| %s | %" PRIu64 " | %s | %s (`programs/p%" PRIu64 ".cu`) | %s | "
                         "%.3f | %.3f | %s |\n",
                         row->best.size, row->bytes, range, id, row->best.program_id, sp,
                         row->best.cand_us, row->best.ref_us,
                         row->best.cell[0] ? row->best.cell : "-");
        else
            kv_sb_printf(b, " *   %-14s %14" PRIu64 "   %-32s %9s %8s %12.3f %12.3f  %s\n",
                         row->best.size, row->bytes, range, id, sp, row->best.cand_us,
                         row->best.ref_us, row->best.cell[0] ? row->best.cell : "-");
    }
}

/* A string as a C literal (names come from problem.json and the archive). */
static void c_string(kv_strbuf *b, const char *s)
{
    kv_sb_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            kv_sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            kv_sb_printf(b, "\\%03o", c);
        else
            kv_sb_put(b, s, 1);
    }
    kv_sb_puts(b, "\"");
}

static void table_rows(kv_strbuf *b, const kv_export_plan *plan)
{
    for (int r = 0; r < plan->n_rows; r++) {
        const kv_export_row *row = &plan->rows[r];
        kv_sb_puts(b, "    {");
        c_string(b, row->best.size);
        if (row->hi == KV_EXPORT_NO_LIMIT)
            kv_sb_printf(b, ", %" PRIu64 "u, %" PRIu64 "u, UINT64_MAX, %" PRIu64 "u, ", row->bytes,
                         row->lo, row->best.program_id);
        else
            kv_sb_printf(b, ", %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, ",
                         row->bytes, row->lo, row->hi, row->best.program_id);
        kv_sb_printf(b, "%.17g, %.17g, %.17g, ", row->best.speedup, row->best.cand_us,
                     row->best.ref_us);
        c_string(b, row->best.cell);
        kv_sb_puts(b, "},\n");
    }
}

/* ---- the dispatcher's declarations --------------------------------------------------------- */

static void dispatch_parts(kv_strbuf *decls, kv_strbuf *entries, const kv_export_plan *plan,
                           const char *P)
{
    for (int i = 0; i < plan->n_programs; i++) {
        uint64_t id = plan->programs[i].prog.id;
        kv_sb_printf(decls,
                     "int kevo_%s_p%" PRIu64 "_init(kevo_ctx *ctx) __attribute__((weak));\n"
                     "int kevo_%s_p%" PRIu64 "_run(kevo_ctx *ctx);\n"
                     "void kevo_%s_p%" PRIu64 "_fini(kevo_ctx *ctx) "
                     "__attribute__((weak));\n",
                     P, id, P, id, P, id);
    }
    for (int r = 0; r < plan->n_rows; r++) {
        uint64_t id = plan->rows[r].best.program_id;
        kv_sb_printf(entries,
                     "    {kevo_%s_p%" PRIu64 "_init, kevo_%s_p%" PRIu64 "_run, kevo_%s_p%" PRIu64
                     "_fini}, // %s\n",
                     P, id, P, id, P, id, plan->rows[r].best.size);
    }
}

/* ---- CMakeLists.txt ------------------------------------------------------------------------ */

static void cmake_text(kv_strbuf *b, const kv_export_plan *plan, const char *P, const char *origin,
                       const char *arch)
{
    kv_sb_printf(
        b,
        "# CMakeLists.txt — libkevo_export_%s: the %s programs kevo found, a dispatcher\n"
        "# that picks one by the size of each call, and a harness (README.md).\n"
        "#\n"
        "# %s\n"
        "# Do not edit: export again.\n"
        "#\n"
        "#   cmake -S . -B build && cmake --build build\n"
        "#\n"
        "# A shared library by default; -DBUILD_SHARED_LIBS=OFF makes a static one.\n"
        "# -DKEVO_EXPORT_CUDA_ARCH=%s is the GPU architecture (kevo measured on sm_%s).\n"
        "# Needs the CUDA toolkit (nvcc, cudart, cuBLAS), NCCL >= 2.28 with its device API\n"
        "# (set NCCL_HOME when it is not beside CUDA), and GNU binutils (ld, objcopy).\n"
        "cmake_minimum_required(VERSION 3.24)\n"
        "project(kevo_export_%s LANGUAGES CXX CUDA)\n\n"
        "option(BUILD_SHARED_LIBS \"build libkevo_export_%s as a shared library\" ON)\n"
        "set(KEVO_EXPORT_CUDA_ARCH \"%s\" CACHE STRING \"the GPU architecture (sm_<this>)\")\n\n"
        "find_package(CUDAToolkit REQUIRED)\n"
        "find_path(NCCL_INCLUDE_DIR nccl.h\n"
        "  HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})\n"
        "find_path(NCCL_DEVICE_INCLUDE_DIR nccl_device.h\n"
        "  HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})\n"
        "find_library(NCCL_LIBRARY nccl HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR})\n"
        "if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_DEVICE_INCLUDE_DIR OR NOT NCCL_LIBRARY)\n"
        "  message(FATAL_ERROR \"kevo_export_%s needs NCCL >= 2.28 with its device API \"\n"
        "    \"(nccl.h, nccl_device.h, libnccl): not found; set NCCL_HOME\")\n"
        "endif()\n"
        "if(NOT CMAKE_LINKER OR NOT CMAKE_OBJCOPY)\n"
        "  message(FATAL_ERROR \"kevo_export_%s needs GNU ld and objcopy (binutils), \"\n"
        "    \"which keep the programs' symbols apart: not found\")\n"
        "endif()\n\n",
        P, plan->problem, origin, arch, arch, P, P, arch, P, P);
    kv_sb_puts(b,
               "set(gencode \"-gencode=arch=compute_${KEVO_EXPORT_CUDA_ARCH},"
               "code=[sm_${KEVO_EXPORT_CUDA_ARCH},compute_${KEVO_EXPORT_CUDA_ARCH}]\")\n"
               "# The flags kevo's evaluator compiles a candidate with, less -shared.\n"
               "set(KEVO_EXPORT_NVCC_FLAGS -O3 -std=c++17 -Xcompiler -fPIC -lineinfo ${gencode}\n"
               "  -I${CMAKE_CURRENT_SOURCE_DIR}/include -I${NCCL_INCLUDE_DIR}\n"
               "  -I${NCCL_DEVICE_INCLUDE_DIR})\n"
               "set(KEVO_EXPORT_HEADERS ${CMAKE_CURRENT_SOURCE_DIR}/include/kevo/kernel.h");
    for (int i = 0; i < plan->n_headers; i++)
        kv_sb_printf(b, "\n  ${CMAKE_CURRENT_SOURCE_DIR}/include/%s", plan->headers[i]);
    kv_sb_printf(
        b,
        ")\n\n"
        "# kevo_export_program(ID): programs/pID.cu, the text kevo measured, compiled with\n"
        "# its kevo_init, kevo_run and kevo_fini renamed kevo_%s_pID_init, _run and _fini\n"
        "# (-D: the source stays as measured). Then every other symbol of the object is made\n"
        "# local: ld -r --force-group-allocation turns its COMDAT groups into plain sections,\n"
        "# objcopy -G keeps only the entry points global. Two programs that define the same\n"
        "# kernel or helper (mutations of one seed do) then neither clash nor share code.\n"
        "set(KEVO_EXPORT_OBJECTS \"\")\n"
        "function(kevo_export_program id)\n"
        "  set(name kevo_%s_p${id})\n"
        "  set(src ${CMAKE_CURRENT_SOURCE_DIR}/programs/p${id}.cu)\n"
        "  set(obj ${CMAKE_CURRENT_BINARY_DIR}/p${id}.o)\n"
        "  add_custom_command(OUTPUT ${obj}\n"
        "    COMMAND ${CMAKE_CUDA_COMPILER} ${KEVO_EXPORT_NVCC_FLAGS}\n"
        "            -Dkevo_init=${name}_init -Dkevo_run=${name}_run -Dkevo_fini=${name}_fini\n"
        "            -c ${src} -o p${id}.nvcc.o\n"
        "    COMMAND ${CMAKE_LINKER} -r --force-group-allocation p${id}.nvcc.o -o p${id}.r.o\n"
        "    COMMAND ${CMAKE_OBJCOPY} -G ${name}_init -G ${name}_run -G ${name}_fini\n"
        "            p${id}.r.o ${obj}\n"
        "    DEPENDS ${src} ${KEVO_EXPORT_HEADERS}\n"
        "    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}\n"
        "    COMMENT \"kevo_export_%s: program ${id}\"\n"
        "    VERBATIM)\n"
        "  set(KEVO_EXPORT_OBJECTS ${KEVO_EXPORT_OBJECTS} ${obj} PARENT_SCOPE)\n"
        "endfunction()\n\n",
        P, P, P);
    for (int i = 0; i < plan->n_programs; i++)
        kv_sb_printf(b, "kevo_export_program(%" PRIu64 ")\n", plan->programs[i].prog.id);
    kv_sb_printf(
        b,
        "\n"
        "add_library(kevo_export_%s src/kevo_export_%s.cu src/kevo_export_%s_harness.cu\n"
        "  ${KEVO_EXPORT_OBJECTS})\n"
        "set_source_files_properties(${KEVO_EXPORT_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE\n"
        "  GENERATED TRUE)\n"
        "set_target_properties(kevo_export_%s PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17\n"
        "  CUDA_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON CUDA_RUNTIME_LIBRARY Shared)\n"
        "target_compile_options(kevo_export_%s PRIVATE\n"
        "  $<$<COMPILE_LANGUAGE:CUDA>:-O3 -lineinfo ${gencode}>)\n"
        "target_include_directories(kevo_export_%s PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include\n"
        "  ${NCCL_INCLUDE_DIR} ${NCCL_DEVICE_INCLUDE_DIR})\n"
        "target_link_libraries(kevo_export_%s PUBLIC CUDA::cudart CUDA::cublas ${NCCL_LIBRARY})\n\n"
        "install(TARGETS kevo_export_%s)\n"
        "install(DIRECTORY include/ DESTINATION include/kevo_export_%s)\n",
        P, P, P, P, P, P, P, P, P);
}

/* ---- README.md ----------------------------------------------------------------------------- */

static void readme_text(kv_strbuf *b, const kv_export_plan *plan, const char *P, const char *when,
                        const char *arch)
{
    kv_sb_printf(b, "# kevo export: %s\n\n", plan->problem);
    kv_sb_printf(
        b,
        "The %s kernels kevo found in `%s`, as one library: the\n"
        "fastest correct program at each measured size, a dispatcher that picks one by\n"
        "the size of each call, a C header, a minimal harness for calling it without\n"
        "kevo, and a CMake file. Exported by kevo %s on %s.\n\n"
        "Only results measured with the full protocol count (never a screening run), and\n"
        "a program's speedup at a size is the NCCL reference's time divided by the\n"
        "program's, both measured in the same run. The input bytes of each size are those\n"
        "at W = %d. The CMake file compiles for sm_%s, with the flags kevo's evaluator\n"
        "uses.\n\n",
        plan->problem, plan->archive, KEVO_VERSION, when, plan->world, arch);
    kv_sb_puts(b, "## Sizes and programs\n\n");
    table_text(b, plan, 1);
    kv_sb_printf(
        b,
        "\nA call's size is the bytes of its inputs on one rank (the sum of\n"
        "`ctx->inputs[i].bytes`). Each measured size takes the calls from the geometric\n"
        "midpoint of its byte count and the next smaller size's to the midpoint with the\n"
        "next larger one's; below the smallest measured size the smallest's program runs,\n"
        "above the largest the largest's. The table is also\n"
        "`include/kevo_export_%s_table.h`, where `kevo_export_%s_row_for(bytes)` gives\n"
        "the row of a call.\n\n",
        P, P);
    if (plan->notes[0]) {
        kv_sb_puts(b, "Measured sizes left out:\n\n");
        for (const char *s = plan->notes; *s;) {
            const char *e = strchr(s, '\n');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            kv_sb_puts(b, "- ");
            kv_sb_put(b, s, n);
            kv_sb_puts(b, "\n");
            s = e ? e + 1 : s + n;
        }
        kv_sb_puts(b, "\n");
    }
    kv_sb_printf(
        b,
        "## Build\n\n"
        "    cmake -S . -B build && cmake --build build\n\n"
        "makes `build/libkevo_export_%s.so` (`-DBUILD_SHARED_LIBS=OFF`: a static library;\n"
        "`-DKEVO_EXPORT_CUDA_ARCH=...`: another GPU architecture than the measured sm_%s).\n"
        "It needs the CUDA toolkit, NCCL >= 2.28 with its device API (`NCCL_HOME`) and GNU\n"
        "binutils. In a CMake project, `add_subdirectory` this folder and link\n"
        "`kevo_export_%s`: the include paths, CUDA, cuBLAS and NCCL come with it.\n\n",
        P, arch, P);
    kv_sb_printf(
        b,
        "## Calling it\n\n"
        "`include/kevo_export_%s.h` declares it all. On every rank of an NCCL communicator\n"
        "(the same calls in the same order on every rank):\n\n"
        "```c\n"
        "// collective: the symmetric window, on every rank\n"
        "kevo_export_%s_env *env;\n"
        "kevo_export_%s_env_create(comm, stream, window_bytes, &env);\n"
        "// symmetric buffers: the same sizes in the same order on every rank\n"
        "void *in, *out;\n"
        "kevo_export_%s_alloc(env, kevo_export_%s_tensor_bytes(world, params, 0, 0), &in);\n"
        "kevo_export_%s_alloc(env, kevo_export_%s_tensor_bytes(world, params, 1, 0), &out);\n"
        "// collective: a context per size, then its tensors (rebind between calls at will)\n"
        "kevo_ctx *ctx;\n"
        "kevo_export_%s_ctx_create(env, params, &ctx);\n"
        "kevo_export_%s_bind(ctx, 0, 0, in);\n"
        "kevo_export_%s_bind(ctx, 1, 0, out);\n"
        "// the program of this size: init once, run per call (on stream; graph-capturable)\n"
        "kevo_export_%s_init(ctx);\n"
        "kevo_export_%s_run(ctx);\n"
        "kevo_export_%s_fini(ctx);\n"
        "kevo_export_%s_ctx_destroy(ctx);\n"
        "kevo_export_%s_env_destroy(env);\n"
        "```\n\n"
        "`params` are the problem's parameters in its order (",
        P, P, P, P, P, P, P, P, P, P, P, P, P, P, P);
    for (int i = 0; i < plan->def.n_params; i++)
        kv_sb_printf(b, "%s`%s`", i ? ", " : "", plan->def.param_names[i]);
    kv_sb_printf(
        b,
        "); `window_bytes` must hold the\n"
        "tensors and `kevo_export_%s_ctx_bytes(world, params)` per context (its signal pad\n"
        "and scratch, as kevo's evaluator gives them). Every tensor a program reads or\n"
        "writes must lie in the window: the programs reach the peers' copies through it.\n"
        "A caller that fills a `kevo_ctx` itself (kevo's ABI, `include/kevo/kernel.h`)\n"
        "calls `kevo_export_%s_init`, `_run` and `_fini` on it directly.\n\n"
        "The programs keep their flags' epochs on the device (kevo's ABI 2): a call\n"
        "captured into a CUDA graph stays correct however often the graph is replayed.\n"
        "Each context has its own signal pad; contexts of one env run one after the\n"
        "other on its stream.\n\n",
        P, P);
    kv_sb_puts(b, "## Files\n\n");
    kv_sb_printf(b,
                 "- `include/kevo_export_%s.h`: the API (dispatcher and harness).\n"
                 "- `include/kevo_export_%s_table.h`: the table above, in plain C.\n"
                 "- `src/kevo_export_%s.cu`: the dispatcher; `src/kevo_export_%s_harness.cu`: the "
                 "harness.\n",
                 P, P, P, P);
    for (int i = 0; i < plan->n_programs; i++) {
        const kv_program *p = &plan->programs[i].prog;
        char sp[32];
        kv_fmt_speedup(p->speedup, sp, sizeof sp);
        kv_sb_printf(b,
                     "- `programs/p%" PRIu64 ".cu`: program #%" PRIu64 " (%s, %s %s; %s over "
                     "its sizes), its source as kevo measured it after a comment with its "
                     "record.\n",
                     p->id, p->id, p->cell[0] ? p->cell : "unclassified", p->op[0] ? p->op : "-",
                     p->model[0] ? p->model : "", sp);
    }
    kv_sb_printf(b, "- `include/kevo/kernel.h`");
    for (int i = 0; i < plan->n_headers; i++)
        kv_sb_printf(b, ", `include/%s`", plan->headers[i]);
    kv_sb_printf(b, ": the headers the programs include, from kevo %s.\n\n", KEVO_VERSION);
    kv_sb_printf(b,
                 "## How the programs are kept apart\n\n"
                 "Every program defines kevo's `kevo_init`, `kevo_run` and `kevo_fini`, and often\n"
                 "kernels and helpers of the same names as the others (mutations of one seed).\n"
                 "`CMakeLists.txt` compiles each source unchanged, as kevo measured it, with\n"
                 "`-Dkevo_init=kevo_%s_p<id>_init` (and `_run`, `_fini`), then makes every other\n"
                 "symbol of its object local (`ld -r --force-group-allocation`, `objcopy -G`), so\n"
                 "that nothing clashes at link time and no program's kernel stands in for\n"
                 "another's. The dispatcher declares `_init` and `_fini` weak: they are optional\n"
                 "in kevo's ABI.\n",
                 P);
}

/* ---- files ----------------------------------------------------------------------------------- */

static int write_text(const char *dir, const char *name, kv_strbuf *b, kv_err *err)
{
    char path[PATH_MAX];
    if (b->oom) {
        kv_sb_free(b);
        return kv_err_set(err, "out of memory writing %s", name);
    }
    if (kv_path_join(path, sizeof path, dir, name, err) != 0) {
        kv_sb_free(b);
        return -1;
    }
    int rc = kv_write_file_atomic(path, b->p ? b->p : "", b->len, err);
    kv_sb_free(b);
    return rc;
}

static int copy_file(const char *from, const char *dir, const char *name, kv_err *err)
{
    char *data = NULL;
    size_t len = 0;
    if (kv_read_file(from, &data, &len, err) != 0)
        return -1;
    char path[PATH_MAX];
    int rc = kv_path_join(path, sizeof path, dir, name, err);
    if (rc == 0)
        rc = kv_write_file_atomic(path, data, len, err);
    free(data);
    return rc;
}

static int make_dirs(const char *tmp, kv_err *err)
{
    static const char *const sub[] = {"include/kevo", "src", "programs"};
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        char path[PATH_MAX];
        if (kv_path_join(path, sizeof path, tmp, sub[i], err) != 0 ||
            kv_mkdir_p(path, 0755, err) != 0)
            return -1;
    }
    return 0;
}

static int write_all(const kv_export_plan *plan, const char *tmp, const char *source_root,
                     kv_err *err)
{
    char P[KV_NAME_MAX + 2], guard[KV_NAME_MAX + 16], now[64], origin[PATH_MAX + 256];
    char nrows[16], world[16], arch[32] = "90a", params_doc[KV_PROBLEM_MAX_PARAMS * 40] = "";
    kv_export_ident(plan->problem, P, sizeof P);
    snprintf(guard, sizeof guard, "KEVO_EXPORT_%s", P);
    for (char *g = guard; *g; g++)
        *g = (char)toupper((unsigned char)*g);
    kv_format_utc(kv_wall_ns(), now, sizeof now);
    snprintf(origin, sizeof origin, "Exported by kevo %s on %s from %s.", KEVO_VERSION, now,
             plan->archive);
    snprintf(nrows, sizeof nrows, "%d", plan->n_rows);
    snprintf(world, sizeof world, "%d", plan->world);
    const char *env_arch = getenv("KEVO_CUDA_ARCH"); /* what kevo's evaluator compiled for */
    if (env_arch && strncmp(env_arch, "sm_", 3) == 0 && env_arch[3] && strlen(env_arch) < 20)
        snprintf(arch, sizeof arch, "%s", env_arch + 3);
    for (int i = 0; i < plan->def.n_params; i++) {
        size_t u = strlen(params_doc);
        snprintf(params_doc + u, sizeof params_doc - u, "%s%s", i ? ", " : "",
                 plan->def.param_names[i]);
    }

    kv_strbuf comment = {0}, rows = {0}, decls = {0}, entries = {0}, specs = {0};
    table_text(&comment, plan, 0);
    table_rows(&rows, plan);
    dispatch_parts(&decls, &entries, plan, P);
    int rc = harness_specs(&specs, &plan->def, err);
    const subst subs[] = {
        {"P", P},
        {"PROBLEM", plan->problem},
        {"GUARD", guard},
        {"ORIGIN", origin},
        {"WORLD", world},
        {"NROWS", nrows},
        {"PARAMS_DOC", params_doc},
        {"TABLE_COMMENT", comment.p ? comment.p : ""},
        {"ROWS", rows.p ? rows.p : ""},
        {"DECLS", decls.p ? decls.p : ""},
        {"ENTRIES", entries.p ? entries.p : ""},
        {"SPECS", specs.p ? specs.p : ""},
    };
    const int n_subs = (int)(sizeof subs / sizeof subs[0]);
    int oom = comment.oom || rows.oom || decls.oom || entries.oom || specs.oom;
    char name[PATH_MAX];
    struct {
        const char *tmpl, *dir, *suffix; /* the file is <dir>/kevo_export_<P><suffix> */
    } files[] = {
        {kv_export_tmpl_header, "include", ".h"},
        {kv_export_tmpl_table, "include", "_table.h"},
        {kv_export_tmpl_dispatch, "src", ".cu"},
        {kv_export_tmpl_harness, "src", "_harness.cu"},
    };
    for (size_t f = 0; rc == 0 && f < sizeof files / sizeof files[0]; f++) {
        kv_strbuf b = {0};
        if (oom)
            b.oom = 1;
        expand(&b, files[f].tmpl, subs, n_subs);
        snprintf(name, sizeof name, "%s/kevo_export_%s%s", files[f].dir, P, files[f].suffix);
        rc = write_text(tmp, name, &b, err);
    }
    kv_sb_free(&comment);
    kv_sb_free(&rows);
    kv_sb_free(&decls);
    kv_sb_free(&entries);
    kv_sb_free(&specs);
    if (rc != 0)
        return -1;

    kv_strbuf b = {0};
    cmake_text(&b, plan, P, origin, arch);
    if (write_text(tmp, "CMakeLists.txt", &b, err) != 0)
        return -1;
    readme_text(&b, plan, P, now, arch);
    if (write_text(tmp, "README.md", &b, err) != 0)
        return -1;

    for (int i = 0; i < plan->n_programs; i++) {
        const kv_export_program *e = &plan->programs[i];
        char *header = kv_export_header(&e->prog, now);
        if (!header)
            return kv_err_set(err, "out of memory");
        kv_sb_puts(&b, header);
        free(header);
        kv_sb_put(&b, e->src, e->len);
        snprintf(name, sizeof name, "programs/p%" PRIu64 ".cu", e->prog.id);
        if (write_text(tmp, name, &b, err) != 0)
            return -1;
    }

    char from[PATH_MAX], patterns[PATH_MAX];
    if (kv_path_join(from, sizeof from, source_root, "include/kevo/kernel.h", err) != 0 ||
        copy_file(from, tmp, "include/kevo/kernel.h", err) != 0 ||
        kv_path_join(patterns, sizeof patterns, source_root, "patterns", err) != 0)
        return -1;
    for (int i = 0; i < plan->n_headers; i++) {
        snprintf(name, sizeof name, "include/%s", plan->headers[i]);
        if (kv_path_join(from, sizeof from, patterns, plan->headers[i], err) != 0 ||
            copy_file(from, tmp, name, err) != 0)
            return -1;
    }
    return 0;
}

/* 0 when path does not exist or is an empty folder; -1 with why otherwise. */
static int usable_out(const char *path, kv_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : kv_err_errno(err, errno, "%s", path);
    if (!S_ISDIR(st.st_mode))
        return kv_err_set(err,
                          "%s: exists and is not a folder; the export goes into a new or "
                          "empty folder",
                          path);
    DIR *d = opendir(path);
    if (!d)
        return kv_err_errno(err, errno, "%s", path);
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            empty = 0;
    closedir(d);
    return empty ? 0
                 : kv_err_set(err,
                              "%s: exists and is not empty; the export goes into a new or "
                              "empty folder (remove it, or choose another --out)",
                              path);
}

int kv_export_write(const kv_export_plan *plan, const char *out_dir, const char *source_root,
                    kv_err *err)
{
    char out[PATH_MAX], tmp[PATH_MAX];
    if (snprintf(out, sizeof out, "%s", out_dir) >= (int)sizeof out)
        return kv_err_set(err, "%s: path too long", out_dir);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = 0;
    if (usable_out(out, err) != 0)
        return -1;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        if (kv_mkdir_p(parent, 0755, err) != 0)
            return -1;
    }
    if (snprintf(tmp, sizeof tmp, "%s.kevo-export-XXXXXX", out) >= (int)sizeof tmp)
        return kv_err_set(err, "%s: path too long", out);
    if (!mkdtemp(tmp))
        return kv_err_errno(err, errno, "making %s (beside the export's folder)", tmp);
    mode_t mask = umask(0); /* mkdtemp's 0700, as a folder made by mkdir would be */
    umask(mask);
    int rc = chmod(tmp, 0777 & ~mask) == 0 ? 0 : kv_err_errno(err, errno, "chmod %s", tmp);
    if (rc == 0)
        rc = make_dirs(tmp, err);
    if (rc == 0)
        rc = write_all(plan, tmp, source_root, err);
    if (rc == 0 && rename(tmp, out) != 0)
        rc = kv_err_errno(err, errno, "renaming %s to %s", tmp, out);
    if (rc != 0)
        (void)kv_rm_rf(tmp);
    return rc;
}
