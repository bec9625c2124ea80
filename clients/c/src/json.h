/* A small JSON reader and writer for the protocol's lines: no allocation per value beyond one node array,
 * every value keeps the span of its text so that payloads and states reach the app as JSON text. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { LC_JSON_NULL, LC_JSON_BOOL, LC_JSON_NUMBER, LC_JSON_STRING, LC_JSON_ARRAY, LC_JSON_OBJECT } lc_json_kind;

typedef struct lc_json {
        lc_json_kind kind;
        const char *text;      /* the value's own text in the line */
        size_t length;
        char *string;          /* decoded, NUL-terminated: strings and object keys (key) */
        char *key;             /* the member name when the parent is an object */
        bool boolean;
        bool integer;          /* a number without fraction or exponent that fits int64 */
        int64_t number;
        size_t children;       /* arrays and objects: how many direct members */
        long first;            /* index of the first child, -1 for none; siblings follow through next */
        long next;
} lc_json;

typedef struct lc_json_document {
        lc_json *nodes;
        size_t count, capacity;
        char *strings;         /* one arena for every decoded string: never larger than the text */
        size_t strings_used;
} lc_json_document;

/* Parses exactly one JSON value filling the whole of text[0..length) (whitespace around allowed).
 * Returns the root, or NULL: -EINVAL for malformed text, -ENOMEM. Pointers stay valid until the free. */
const lc_json *lc_json_parse(lc_json_document *doc, const char *text, size_t length, int *error);
void lc_json_document_free(lc_json_document *doc);
const lc_json *lc_json_member(const lc_json_document *doc, const lc_json *object, const char *key);
const lc_json *lc_json_child(const lc_json_document *doc, const lc_json *parent, size_t index);
/* Whether text[0..length) is one well-formed JSON value. */
bool lc_json_valid(const char *text, size_t length);

/* A growing output buffer. Functions return 0 or -ENOMEM. */
typedef struct lc_buffer {
        char *data;
        size_t length, capacity;
} lc_buffer;

int lc_buffer_append(lc_buffer *b, const char *bytes, size_t length);
int lc_buffer_append_string(lc_buffer *b, const char *s);
/* A JSON string literal, escaped. */
int lc_buffer_append_json_string(lc_buffer *b, const char *s);
void lc_buffer_consume(lc_buffer *b, size_t length);
void lc_buffer_free(lc_buffer *b);
