/* server/text_tags: shared by the output parsers (tool_parse, reasoning). */
#ifndef XI_TEXT_TAGS_H
#define XI_TEXT_TAGS_H

#include <string.h>

/* Length of the longest tail of text[0, len) that is a proper prefix of tag: the bytes a
 * stream must hold back because the next ones may complete the tag. */
static inline size_t xi_tag_partial_tail(const char *text, size_t len, const char *tag) {
    const size_t n = strlen(tag);
    for (size_t k = len < n - 1 ? len : n - 1; k > 0; k--)
        if (!memcmp(text + len - k, tag, k)) return k;
    return 0;
}

#endif
