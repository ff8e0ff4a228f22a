/* runtime_lookups.c — the names a candidate may not reach unless the run
 * allows runtime lookups, found in its source and in its imports (see
 * runtime_lookups.h).
 *
 * The source scan reads C++ the way the compiler's first phases do, far
 * enough to tell identifiers from the rest: line splices (backslash-newline)
 * are removed, comments, string and character literals (raw strings
 * included) and numbers are skipped. "system" in a comment or "fork" in a
 * message is no call; thread_scope_system is another identifier. What the
 * scan cannot see (a name pasted by the preprocessor, declared under an asm
 * label, spelled with universal character names) still lands in the
 * imports of the compiled object, the second list checked here. */
#include "evaluator/checks/runtime_lookups.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "evaluator/checks/classify.h"

enum {
    W_ENTRY_POINTS,
    W_DYNAMIC_LINKER,
    W_RAW_SYSCALLS,
    W_CODE_LOADING,
    W_PROCESSES,
    W_CODE_MAPPINGS,
};

static const char *const what_names[] = {
    [W_ENTRY_POINTS] = "looks up driver entry points by name",
    [W_DYNAMIC_LINKER] = "finds symbols through the dynamic linker",
    [W_RAW_SYSCALLS] = "makes raw system calls",
    [W_CODE_LOADING] = "loads or compiles code at run time",
    [W_PROCESSES] = "starts processes",
    [W_CODE_MAPPINGS] = "changes the mappings or protection of code",
};

typedef struct {
    const char *name;
    int prefix; /* also every identifier that starts with name */
    int what;
} refused_name;

static const refused_name refused[] = {
    {"cuGetProcAddress", 1, W_ENTRY_POINTS},
    {"cudaGetDriverEntryPoint", 1, W_ENTRY_POINTS},
    {"cuGetExportTable", 0, W_ENTRY_POINTS},
    {"cudaGetExportTable", 0, W_ENTRY_POINTS},
    {"dlopen", 0, W_DYNAMIC_LINKER},
    {"dlmopen", 0, W_DYNAMIC_LINKER},
    {"dlsym", 0, W_DYNAMIC_LINKER},
    {"dlvsym", 0, W_DYNAMIC_LINKER},
    {"dladdr", 0, W_DYNAMIC_LINKER},
    {"dladdr1", 0, W_DYNAMIC_LINKER}, /* RTLD_DL_LINKMAP: the list of loaded objects */
    {"dlinfo", 0, W_DYNAMIC_LINKER},  /* RTLD_DI_LINKMAP: the same */
    {"dl_iterate_phdr", 0, W_DYNAMIC_LINKER},
    {"_dl_find_object", 0, W_DYNAMIC_LINKER},
    {"_r_debug", 0, W_DYNAMIC_LINKER},
    {"_DYNAMIC", 0, W_DYNAMIC_LINKER},
    {"_GLOBAL_OFFSET_TABLE_", 0, W_DYNAMIC_LINKER},
    {"getauxval", 0,
     W_DYNAMIC_LINKER}, /* AT_BASE, AT_PHDR: the linker's and the program's headers */
    {"__libc_dlopen_mode", 0, W_DYNAMIC_LINKER},
    {"__libc_dlsym", 0, W_DYNAMIC_LINKER},
    {"__libc_dlvsym", 0, W_DYNAMIC_LINKER},
    {"syscall", 0, W_RAW_SYSCALLS},
    {"cuModuleLoad", 1, W_CODE_LOADING},
    {"cuLibraryLoad", 1, W_CODE_LOADING},
    {"cudaLibraryLoad", 1, W_CODE_LOADING},
    {"cuLinkCreate", 1, W_CODE_LOADING},
    {"nvrtc", 1, W_CODE_LOADING},
    {"nvJitLink", 1, W_CODE_LOADING},
    {"fork", 0, W_PROCESSES},
    {"forkpty", 0, W_PROCESSES},
    {"daemon", 0, W_PROCESSES},
    {"vfork", 0, W_PROCESSES},
    {"_Fork", 0, W_PROCESSES},
    {"clone", 0, W_PROCESSES},
    {"clone3", 0, W_PROCESSES},
    {"__clone", 0, W_PROCESSES},
    {"execl", 0, W_PROCESSES},
    {"execle", 0, W_PROCESSES},
    {"execlp", 0, W_PROCESSES},
    {"execv", 0, W_PROCESSES},
    {"execve", 0, W_PROCESSES},
    {"execveat", 0, W_PROCESSES},
    {"execvp", 0, W_PROCESSES},
    {"execvpe", 0, W_PROCESSES},
    {"fexecve", 0, W_PROCESSES},
    {"posix_spawn", 1, W_PROCESSES},
    {"system", 0, W_PROCESSES},
    {"popen", 0, W_PROCESSES},
    {"mprotect", 0, W_CODE_MAPPINGS}, /* could write the trapped entry points back */
    {"pkey_mprotect", 0, W_CODE_MAPPINGS},
    {"mmap", 0, W_CODE_MAPPINGS}, /* MAP_FIXED over libcuda: its original code again */
    {"mmap64", 0, W_CODE_MAPPINGS},
    {"mremap", 0, W_CODE_MAPPINGS},
};

/* The entry for the identifier [s, s+n), or NULL. */
static const refused_name *match(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        size_t k = strlen(refused[i].name);
        if (n == k || (refused[i].prefix && n > k))
            if (memcmp(s, refused[i].name, k) == 0)
                return &refused[i];
    }
    return NULL;
}

static void fill_hit(kv_lookup_hit *hit, const refused_name *r, const char *name, size_t n,
                     int line)
{
    memset(hit, 0, sizeof *hit);
    snprintf(hit->name, sizeof hit->name, "%.*s", (int)n, name);
    hit->what = what_names[r->what];
    hit->line = line;
}

/* ---- the source ---------------------------------------------------------------------------- */

typedef struct {
    const char *p; /* the next character, after any line splices */
    int line;
} cursor;

/* Steps over line splices (backslash, then a newline) at c->p. */
static void splice(cursor *c)
{
    while (c->p[0] == '\\' && (c->p[1] == '\n' || (c->p[1] == '\r' && c->p[2] == '\n'))) {
        c->p += c->p[1] == '\n' ? 2 : 3;
        c->line++;
    }
}

/* Moves past one character (and the splices after it). */
static void advance(cursor *c)
{
    if (*c->p == '\n')
        c->line++;
    if (*c->p)
        c->p++;
    splice(c);
}

/* The character after the current one, splices skipped. */
static char peek(const cursor *c)
{
    cursor n = *c;
    advance(&n);
    return *n.p;
}

static int ident_start(char ch)
{
    return isalpha((unsigned char)ch) || ch == '_' || ch == '$';
}

static int ident_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_' || ch == '$';
}

static void skip_line_comment(cursor *c)
{
    while (*c->p && *c->p != '\n')
        advance(c);
}

static void skip_block_comment(cursor *c)
{
    advance(c); /* '/' */
    advance(c); /* '*' */
    while (*c->p && !(*c->p == '*' && peek(c) == '/'))
        advance(c);
    advance(c);
    advance(c);
}

/* A string or character literal; an unterminated one ends at the line. */
static void skip_quoted(cursor *c)
{
    char q = *c->p;
    advance(c);
    while (*c->p && *c->p != q && *c->p != '\n') {
        if (*c->p == '\\')
            advance(c);
        advance(c);
    }
    if (*c->p == q)
        advance(c);
}

/* The encoding prefixes of a raw string literal ([lex.string]): only these,
 * right before the quote, make one; `xR"(` is the identifier xR (a macro,
 * perhaps) and an ordinary string. */
static int raw_prefix(const char *name, size_t n)
{
    static const char *const prefixes[] = {"R", "LR", "uR", "UR", "u8R"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strlen(prefixes[i]) == n && memcmp(name, prefixes[i], n) == 0)
            return 1;
    return 0;
}

/* A d-char: any basic character but space, the parentheses, backslash and
 * the control characters. */
static int d_char(char ch)
{
    return ch > ' ' && ch < 0x7F && ch != '(' && ch != ')' && ch != '\\';
}

/* R"delim( ... )delim" at c->p (the quote). The phases that remove splices
 * are undone between the quotes, so the text is read as it is; the string
 * ends only at `)delim"`. A delimiter of more than 16 characters or with a
 * character it may not hold makes no raw string (the compiler refuses the
 * source): then the quote opens an ordinary string. */
static void skip_raw_string(cursor *c)
{
    const char *d = c->p + 1;
    const char *open = d;
    while (d_char(*open) && open - d < 16)
        open++;
    if (*open != '(') {
        skip_quoted(c);
        return;
    }
    size_t dn = (size_t)(open - d);
    const char *q = open + 1;
    for (; *q; q++) {
        if (*q == '\n')
            c->line++;
        if (*q == ')' && strncmp(q + 1, d, dn) == 0 && q[1 + dn] == '"') {
            q += dn + 2;
            break;
        }
    }
    c->p = q;
    splice(c);
}

/* A preprocessing number: digits, letters, '.', digit separators, and a sign
 * after an exponent. */
static void skip_number(cursor *c)
{
    char prev = 0;
    while (ident_char(*c->p) || *c->p == '.' || *c->p == '\'' ||
           ((*c->p == '+' || *c->p == '-') &&
            (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P'))) {
        prev = *c->p;
        advance(c);
    }
}

/* The trimmed text of the line that holds pos, cut to fit. */
static void line_text(const char *src, const char *pos, char *out, size_t cap)
{
    const char *b = pos, *e = pos;
    while (b > src && b[-1] != '\n')
        b--;
    while (*e && *e != '\n')
        e++;
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    size_t n = (size_t)(e - b);
    if (n < cap) {
        snprintf(out, cap, "%.*s", (int)n, b);
    } else {
        snprintf(out, cap, "%.*s...", (int)(cap - 4), b);
    }
    for (char *q = out; *q; q++)
        if ((unsigned char)*q < 0x20)
            *q = ' ';
}

static int scan_source(const char *src, kv_lookup_hit *hit)
{
    cursor c = {src, 1};
    splice(&c);
    while (*c.p) {
        char ch = *c.p;
        if (ch == '/' && peek(&c) == '/') {
            skip_line_comment(&c);
        } else if (ch == '/' && peek(&c) == '*') {
            skip_block_comment(&c);
        } else if (ch == '"' || ch == '\'') {
            skip_quoted(&c);
        } else if (isdigit((unsigned char)ch) || (ch == '.' && isdigit((unsigned char)peek(&c)))) {
            skip_number(&c);
        } else if (ident_start(ch)) {
            const char *start = c.p;
            int line = c.line;
            char name[64];
            size_t n = 0, full = 0;
            while (ident_char(*c.p)) {
                if (n < sizeof name - 1)
                    name[n++] = *c.p;
                full++;
                advance(&c);
            }
            const refused_name *r = match(name, n);
            if (r && (full == n || r->prefix)) {
                fill_hit(hit, r, name, n, line);
                line_text(src, start, hit->text, sizeof hit->text);
                return 1;
            }
            if (*c.p == '"' && full == n && raw_prefix(name, n))
                skip_raw_string(&c);
        } else {
            advance(&c);
        }
    }
    return 0;
}

/* ---- the imports --------------------------------------------------------------------------- */

static int scan_imports(const char *imports, kv_lookup_hit *hit)
{
    const char *s = imports;
    while (*s) {
        const char *e = strchr(s, '\n');
        if (!e)
            e = s + strlen(s);
        size_t n;
        const char *b = kv_import_symbol(s, e, &n);
        const refused_name *r = n > 0 ? match(b, n) : NULL;
        if (r) {
            fill_hit(hit, r, b, n, 0);
            return 1;
        }
        s = *e ? e + 1 : e;
    }
    return 0;
}

int kv_find_runtime_lookup(const char *source, const char *imports, kv_lookup_hit *hit)
{
    if (source && scan_source(source, hit))
        return 1;
    return imports && scan_imports(imports, hit);
}

void kv_lookup_hit_message(const kv_lookup_hit *hit, char *out, size_t cap)
{
    static const char tail[] =
        "; candidates may not reach driver entry points, load code or start processes at run "
        "time (the run allows it with evaluation.allow_runtime_lookups, kevo eval and kevo seed "
        "with --allow-runtime-lookups)";
    if (hit->line > 0)
        snprintf(out, cap, "uses %s (%s) at candidate.cu line %d: `%s`%s", hit->name, hit->what,
                 hit->line, hit->text, tail);
    else
        snprintf(out, cap, "imports %s (%s): an undefined symbol of the compiled candidate%s",
                 hit->name, hit->what, tail);
}
