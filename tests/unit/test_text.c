/* test_text.c — text made safe for a terminal and for JSON (common/text.h,
 * common/json_out.h): every control a terminal acts on escaped, printable
 * UTF-8 kept; invalid UTF-8 (a lone continuation byte, an overlong form, a
 * sequence cut short, a surrogate, a code point over U+10FFFF) replaced
 * by U+FFFD and counted; JSON printed from such strings parses strictly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/base64.h"
#include "common/json_out.h"
#include "common/text.h"
#include "test.h"

#define STR_EQ(got, want) \
    KV_CHECKF(strcmp((got), (want)) == 0, "got \"%s\", want \"%s\"", (got), (want))

static void test_terminal(void)
{
    char out[256];
    kv_text_for_terminal("\x1b[2J\x1b]0;title\x07\rEVIL\nnext\x7f\x01\tend", out, sizeof out,
                         KV_TEXT_ONE_LINE);
    STR_EQ(out, "\\e[2J\\e]0;title\\a\\rEVIL\\nnext\\x7F\\x01\tend");
    kv_text_for_terminal("a\nb", out, sizeof out, KV_TEXT_MULTI_LINE);
    STR_EQ(out, "a\nb");
    /* C1 controls, as UTF-8 and as raw bytes (0x9B: CSI on some terminals) */
    kv_text_for_terminal("x\xc2\x9b"
                         "1m y\x9b"
                         "1m",
                         out, sizeof out, KV_TEXT_ONE_LINE);
    STR_EQ(out, "x\\u009B1m y\\x9B1m");
    /* printable UTF-8 stays; invalid bytes are shown, not passed on */
    kv_text_for_terminal("µs → ok \xc0\xaf \xe2\x82", out, sizeof out, KV_TEXT_ONE_LINE);
    STR_EQ(out, "µs → ok \\xC0\\xAF \\xE2\\x82");
    /* cut short: never inside an escape or a character */
    char small[6];
    kv_text_for_terminal("ab\x1b"
                         "cd",
                         small, sizeof small, KV_TEXT_ONE_LINE);
    STR_EQ(small, "ab\\ec");
    kv_text_for_terminal("ab\x1b"
                         "cd",
                         small, 4, KV_TEXT_ONE_LINE);
    STR_EQ(small, "ab");
    kv_text_for_terminal("a→", small, 3, KV_TEXT_ONE_LINE);
    STR_EQ(small, "a");
    STR_EQ(KV_TERM(out, (const char *)NULL), "");
}

/* kv_text_fput: the same escapes, however long the text; kv_text_is_inert. */
static void test_terminal_stream(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    KV_REQUIRE(f);
    KV_CHECK(kv_text_fput(f, "a\x1b[2J\nb\x9b", KV_TEXT_MULTI_LINE) == 0);
    KV_CHECK(kv_text_fput(f, "|\n|", KV_TEXT_ONE_LINE) == 0);
    KV_REQUIRE(fclose(f) == 0);
    STR_EQ(buf, "a\\e[2J\nb\\x9B|\\n|");
    free(buf);
    KV_CHECK(kv_text_is_inert("int x;\n\tµs", 11));
    KV_CHECK(!kv_text_is_inert("a\x1b", 2));
    KV_CHECK(!kv_text_is_inert("a\r\n", 3));
    KV_CHECK(!kv_text_is_inert("\xc2\x9b", 2));
    KV_CHECK(!kv_text_is_inert("\xff", 1));
    KV_CHECK(!kv_text_is_inert("a\0b", 3)); /* a NUL inside the length */
}

/* RFC 4648's test vectors. */
static void test_base64(void)
{
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const want[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                       "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char *got = kv_base64(in[i], strlen(in[i]));
        KV_REQUIRE(got);
        STR_EQ(got, want[i]);
        free(got);
    }
    char *got = kv_base64("\x1b\xff\0", 3);
    KV_REQUIRE(got);
    STR_EQ(got, "G/8A");
    free(got);
}

static void test_utf8(void)
{
    static const struct {
        const char *in, *want;
        size_t replaced;
    } cases[] = {
        {"plain", "plain", 0},
        {"µ→😀", "µ→😀", 0},
        {"a\x80z", "a\xEF\xBF\xBDz", 1},                             /* lone continuation */
        {"\xc0\xaf", "\xEF\xBF\xBD\xEF\xBF\xBD", 2},                 /* overlong '/' */
        {"\xe0\x80\xaf", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 3}, /* overlong, 3 bytes */
        {"x\xe2\x82", "x\xEF\xBF\xBD\xEF\xBF\xBD", 2},               /* cut short at the end */
        {"\xe2\x82x", "\xEF\xBF\xBD\xEF\xBF\xBDx", 2},               /* cut short mid-text */
        {"\xed\xa0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 3}, /* a surrogate */
        {"\xf4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD",
         4}, /* > U+10FFFF */
        {"\xff", "\xEF\xBF\xBD", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = 0, replaced = 99;
        char *out = kv_utf8_repair(cases[i].in, strlen(cases[i].in), &len, &replaced);
        KV_CHECKF(out && strcmp(out, cases[i].want) == 0 && len == strlen(cases[i].want) &&
                      replaced == cases[i].replaced,
                  "case %zu: %zu replaced", i, replaced);
        free(out);
    }
    /* a NUL inside is kept (len counts it) */
    size_t len = 0;
    char *out = kv_utf8_repair("a\0b", 3, &len, NULL);
    KV_CHECK(out && len == 3 && memcmp(out, "a\0b", 4) == 0);
    free(out);
}

/* JSON printed from strings with invalid UTF-8: valid UTF-8, parses, keeps
 * the structure, and says how many bytes it replaced. */
static void test_json_print(void)
{
    cJSON *o = cJSON_CreateObject();
    KV_REQUIRE(o != NULL);
    cJSON_AddStringToObject(o, "detail", "bad \x80 \xc0\xaf \xe2\x82 \x1b[2J");
    cJSON_AddStringToObject(o, "k\xff", "v");
    for (int formatted = 0; formatted < 2; formatted++) {
        size_t replaced = 0;
        char *text = kv_json_print(o, formatted, &replaced);
        KV_REQUIRE(text != NULL);
        KV_CHECKF(replaced == 6, "%zu replaced", replaced);
        size_t n = strlen(text), l;
        for (size_t i = 0; i < n; i += l)
            KV_REQUIRE((l = kv_utf8_seq((const unsigned char *)text + i, n - i, NULL)) > 0);
        cJSON *back = cJSON_Parse(text);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(back, "detail");
        KV_CHECK(cJSON_IsString(d) &&
                 strcmp(d->valuestring, "bad \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD "
                                        "\xEF\xBF\xBD\xEF\xBF\xBD \x1b[2J") == 0);
        KV_CHECK(cJSON_GetObjectItemCaseSensitive(back, "k\xEF\xBF\xBD") != NULL);
        KV_CHECK(strstr(text, "\\u001b[2J") != NULL); /* controls escaped by cJSON */
        cJSON_Delete(back);
        free(text);
    }
    cJSON_Delete(o);
}

int main(void)
{
    KV_RUN(test_terminal);
    KV_RUN(test_terminal_stream);
    KV_RUN(test_base64);
    KV_RUN(test_utf8);
    KV_RUN(test_json_print);
    return kv_test_summary();
}
