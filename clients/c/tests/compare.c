/* JSON values compared as values: field order, spacing and number spelling do not matter. */
#include <stdlib.h>
#include <string.h>

#include "runner.h"

static bool node_equal(const lc_json_document *da, const lc_json *a, const lc_json_document *db, const lc_json *b) {
        if (a->kind != b->kind) return false;
        switch (a->kind) {
        case LC_JSON_NULL: return true;
        case LC_JSON_BOOL: return a->boolean == b->boolean;
        case LC_JSON_STRING: return strcmp(a->string, b->string) == 0;
        case LC_JSON_NUMBER: {
                char x[64] = "", y[64] = "";
                memcpy(x, a->text, a->length < 63 ? a->length : 63);
                memcpy(y, b->text, b->length < 63 ? b->length : 63);
                return strtod(x, NULL) == strtod(y, NULL);
        }
        case LC_JSON_ARRAY:
                if (a->children != b->children) return false;
                for (size_t i = 0; i < a->children; i++)
                        if (!node_equal(da, lc_json_child(da, a, i), db, lc_json_child(db, b, i))) return false;
                return true;
        case LC_JSON_OBJECT:
                if (a->children != b->children) return false;
                for (size_t i = 0; i < a->children; i++) {
                        const lc_json *member = lc_json_child(da, a, i), *other = lc_json_member(db, b, member->key);
                        if (!other || !node_equal(da, member, db, other)) return false;
                }
                return true;
        }
        return false;
}

bool json_equal_text(const char *a, const char *b) {
        lc_json_document da, db;
        int error;
        const lc_json *ra = lc_json_parse(&da, a, strlen(a), &error), *rb = lc_json_parse(&db, b, strlen(b), &error);
        bool equal = ra && rb && node_equal(&da, ra, &db, rb);
        lc_json_document_free(&da);
        lc_json_document_free(&db);
        return equal;
}

