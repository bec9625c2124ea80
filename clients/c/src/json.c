#include "json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Nesting deeper than this is refused, so that a hostile line cannot exhaust the stack. */
#define MAX_DEPTH 128

typedef struct parser {
        lc_json_document *doc;
        const char *p, *end;
        int error;
} parser;

static void skip_space(parser *ps) {
        while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
                ps->p++;
}

static long new_node(parser *ps, lc_json_kind kind) {
        lc_json_document *doc = ps->doc;
        if (doc->count == doc->capacity) {
                size_t capacity = doc->capacity ? doc->capacity * 2 : 16;
                lc_json *nodes = realloc(doc->nodes, capacity * sizeof *nodes);
                if (!nodes) {
                        ps->error = -ENOMEM;
                        return -1;
                }
                doc->nodes = nodes;
                doc->capacity = capacity;
        }
        lc_json *node = &doc->nodes[doc->count];
        memset(node, 0, sizeof *node);
        node->kind = kind;
        node->first = node->next = -1;
        node->text = ps->p;
        return (long)doc->count++;
}

static int hex(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
}

static int read_hex4(parser *ps, unsigned *out) {
        if (ps->end - ps->p < 4) return -1;
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
                int h = hex(ps->p[i]);
                if (h < 0) return -1;
                v = v * 16 + (unsigned)h;
        }
        ps->p += 4;
        *out = v;
        return 0;
}

static void put_utf8(char **out, unsigned cp) {
        char *o = *out;
        if (cp < 0x80) *o++ = (char)cp;
        else if (cp < 0x800) { *o++ = (char)(0xC0 | (cp >> 6)); *o++ = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) { *o++ = (char)(0xE0 | (cp >> 12)); *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *o++ = (char)(0x80 | (cp & 0x3F)); }
        else { *o++ = (char)(0xF0 | (cp >> 18)); *o++ = (char)(0x80 | ((cp >> 12) & 0x3F)); *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *o++ = (char)(0x80 | (cp & 0x3F)); }
        *out = o;
}

/* Decodes a string literal at ps->p into the arena; returns the decoded text's offset or -1. A \u escape
 * takes at most six source bytes for at most four output bytes, so the arena (text length + 1) never overflows. */
static long parse_string_literal(parser *ps) {
        if (ps->p >= ps->end || *ps->p != '"') return -1;
        ps->p++;
        lc_json_document *doc = ps->doc;
        char *start = doc->strings + doc->strings_used, *o = start;
        while (ps->p < ps->end) {
                unsigned char c = (unsigned char)*ps->p++;
                if (c == '"') {
                        *o++ = 0;
                        long offset = (long)doc->strings_used;
                        doc->strings_used += (size_t)(o - start);
                        return offset;
                }
                if (c < 0x20) return -1;
                if (c != '\\') { *o++ = (char)c; continue; }
                if (ps->p >= ps->end) return -1;
                char e = *ps->p++;
                switch (e) {
                case '"': *o++ = '"'; break;
                case '\\': *o++ = '\\'; break;
                case '/': *o++ = '/'; break;
                case 'b': *o++ = '\b'; break;
                case 'f': *o++ = '\f'; break;
                case 'n': *o++ = '\n'; break;
                case 'r': *o++ = '\r'; break;
                case 't': *o++ = '\t'; break;
                case 'u': {
                        unsigned cp, low;
                        if (read_hex4(ps, &cp) < 0) return -1;
                        if (cp >= 0xD800 && cp < 0xDC00) {
                                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') return -1;
                                ps->p += 2;
                                if (read_hex4(ps, &low) < 0 || low < 0xDC00 || low > 0xDFFF) return -1;
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        } else if (cp >= 0xDC00 && cp < 0xE000) {
                                return -1;
                        }
                        if (cp == 0) return -1; /* an embedded NUL would cut the C string short */
                        put_utf8(&o, cp);
                        break;
                }
                default: return -1;
                }
        }
        return -1;
}

static long parse_value(parser *ps, int depth);

static int parse_number(parser *ps, lc_json *node) {
        const char *s = ps->p;
        bool integer = true;
        if (ps->p < ps->end && *ps->p == '-') ps->p++;
        if (ps->p >= ps->end) return -1;
        if (*ps->p == '0') ps->p++;
        else if (*ps->p >= '1' && *ps->p <= '9') while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
        else return -1;
        if (ps->p < ps->end && *ps->p == '.') {
                integer = false;
                ps->p++;
                if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return -1;
                while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
        }
        if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
                integer = false;
                ps->p++;
                if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
                if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return -1;
                while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
        }
        if (integer) {
                /* Digits only: accumulate with an overflow check instead of strtoll on an unterminated span. */
                const char *d = s;
                bool negative = *d == '-';
                if (negative) d++;
                uint64_t v = 0, limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
                for (; d < ps->p; d++) {
                        unsigned digit = (unsigned)(*d - '0');
                        if (v > (limit - digit) / 10) { integer = false; break; }
                        v = v * 10 + digit;
                }
                if (integer) node->number = negative ? (int64_t)(0 - v) : (int64_t)v;
        }
        node->integer = integer;
        return 0;
}

static bool literal(parser *ps, const char *word) {
        size_t n = strlen(word);
        if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
        ps->p += n;
        return true;
}

static long parse_container(parser *ps, long self, int depth, bool object) {
        char close = object ? '}' : ']';
        ps->p++;
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return self; }
        long last = -1;
        for (;;) {
                skip_space(ps);
                long key = -1;
                if (object) {
                        key = parse_string_literal(ps);
                        if (key < 0) return -1;
                        skip_space(ps);
                        if (ps->p >= ps->end || *ps->p != ':') return -1;
                        ps->p++;
                        skip_space(ps);
                }
                long child = parse_value(ps, depth + 1);
                if (child < 0) return -1;
                if (object) ps->doc->nodes[child].key = ps->doc->strings + key;
                if (last < 0) ps->doc->nodes[self].first = child; else ps->doc->nodes[last].next = child;
                last = child;
                ps->doc->nodes[self].children++;
                skip_space(ps);
                if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
                if (ps->p < ps->end && *ps->p == close) { ps->p++; return self; }
                return -1;
        }
}

static long parse_value(parser *ps, int depth) {
        if (depth > MAX_DEPTH || ps->p >= ps->end) return -1;
        char c = *ps->p;
        long self;
        switch (c) {
        case '{': case '[':
                self = new_node(ps, c == '{' ? LC_JSON_OBJECT : LC_JSON_ARRAY);
                if (self < 0 || parse_container(ps, self, depth, c == '{') < 0) return -1;
                break;
        case '"': {
                self = new_node(ps, LC_JSON_STRING);
                if (self < 0) return -1;
                long offset = parse_string_literal(ps);
                if (offset < 0) return -1;
                ps->doc->nodes[self].string = ps->doc->strings + offset;
                break;
        }
        case 't': case 'f':
                self = new_node(ps, LC_JSON_BOOL);
                if (self < 0) return -1;
                ps->doc->nodes[self].boolean = c == 't';
                if (!literal(ps, c == 't' ? "true" : "false")) return -1;
                break;
        case 'n':
                self = new_node(ps, LC_JSON_NULL);
                if (self < 0 || !literal(ps, "null")) return -1;
                break;
        default:
                self = new_node(ps, LC_JSON_NUMBER);
                if (self < 0 || parse_number(ps, &ps->doc->nodes[self]) < 0) return -1;
        }
        ps->doc->nodes[self].length = (size_t)(ps->p - ps->doc->nodes[self].text);
        return self;
}

/* UTF-8 as RFC 3629 allows: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool valid_utf8(const unsigned char *s, size_t n) {
        size_t i = 0;
        while (i < n) {
                unsigned char c = s[i];
                size_t extra;
                unsigned cp;
                if (c < 0x80) { i++; continue; }
                else if (c >= 0xC2 && c <= 0xDF) { extra = 1; cp = c & 0x1F; }
                else if (c >= 0xE0 && c <= 0xEF) { extra = 2; cp = c & 0x0F; }
                else if (c >= 0xF0 && c <= 0xF4) { extra = 3; cp = c & 0x07; }
                else return false;
                if (n - i <= extra) return false;
                for (size_t k = 1; k <= extra; k++) {
                        if ((s[i + k] & 0xC0) != 0x80) return false;
                        cp = (cp << 6) | (s[i + k] & 0x3F);
                }
                if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
                        return false;
                i += extra + 1;
        }
        return true;
}

const lc_json *lc_json_parse(lc_json_document *doc, const char *text, size_t length, int *error) {
        memset(doc, 0, sizeof *doc);
        *error = -EINVAL;
        if (!valid_utf8((const unsigned char *)text, length)) return NULL;
        doc->strings = malloc(length + 1);
        if (!doc->strings) { *error = -ENOMEM; return NULL; }
        parser ps = { .doc = doc, .p = text, .end = text + length, .error = 0 };
        skip_space(&ps);
        long root = parse_value(&ps, 0);
        skip_space(&ps);
        if (root < 0 || ps.p != ps.end) {
                if (ps.error) *error = ps.error;
                return NULL;
        }
        *error = 0;
        return &doc->nodes[root];
}

void lc_json_document_free(lc_json_document *doc) {
        free(doc->nodes);
        free(doc->strings);
        memset(doc, 0, sizeof *doc);
}

const lc_json *lc_json_member(const lc_json_document *doc, const lc_json *object, const char *key) {
        if (!object || object->kind != LC_JSON_OBJECT) return NULL;
        const lc_json *found = NULL;
        /* The last of duplicate keys wins, as most JSON readers do. */
        for (long i = object->first; i >= 0; i = doc->nodes[i].next)
                if (strcmp(doc->nodes[i].key, key) == 0) found = &doc->nodes[i];
        return found;
}

const lc_json *lc_json_child(const lc_json_document *doc, const lc_json *parent, size_t index) {
        if (!parent) return NULL;
        for (long i = parent->first; i >= 0; i = doc->nodes[i].next, index--)
                if (index == 0) return &doc->nodes[i];
        return NULL;
}

bool lc_json_valid(const char *text, size_t length) {
        lc_json_document doc;
        int error;
        bool ok = lc_json_parse(&doc, text, length, &error) != NULL;
        lc_json_document_free(&doc);
        return ok;
}

int lc_buffer_append(lc_buffer *b, const char *bytes, size_t length) {
        if (b->capacity - b->length < length + 1) {
                size_t capacity = b->capacity ? b->capacity : 256;
                while (capacity - b->length < length + 1) capacity *= 2;
                char *data = realloc(b->data, capacity);
                if (!data) return -ENOMEM;
                b->data = data;
                b->capacity = capacity;
        }
        memcpy(b->data + b->length, bytes, length);
        b->length += length;
        b->data[b->length] = 0;
        return 0;
}

int lc_buffer_append_string(lc_buffer *b, const char *s) { return lc_buffer_append(b, s, strlen(s)); }

int lc_buffer_append_json_string(lc_buffer *b, const char *s) {
        static const char digits[] = "0123456789abcdef";
        int r = lc_buffer_append(b, "\"", 1);
        for (const unsigned char *c = (const unsigned char *)s; r == 0 && *c; c++) {
                if (*c == '"' || *c == '\\') {
                        char e[2] = { '\\', (char)*c };
                        r = lc_buffer_append(b, e, 2);
                } else if (*c < 0x20) {
                        char e[6] = { '\\', 'u', '0', '0', digits[*c >> 4], digits[*c & 15] };
                        r = lc_buffer_append(b, e, 6);
                } else {
                        r = lc_buffer_append(b, (const char *)c, 1);
                }
        }
        return r < 0 ? r : lc_buffer_append(b, "\"", 1);
}

void lc_buffer_consume(lc_buffer *b, size_t length) {
        if (length >= b->length) { b->length = 0; return; }
        memmove(b->data, b->data + length, b->length - length);
        b->length -= length;
}

void lc_buffer_free(lc_buffer *b) {
        free(b->data);
        memset(b, 0, sizeof *b);
}
