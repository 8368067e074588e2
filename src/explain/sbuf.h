/* A growable text buffer for the writers (JSON, SVG). Appending never
 * fails loudly: on out of memory the buffer is marked failed and later
 * appends are ignored, so writers check once at the end. Locale-free. */
#ifndef VS_SBUF_H
#define VS_SBUF_H

#include <stddef.h>
#include <stdint.h>

#include "plat_types.h" /* VS_PRINTF */

typedef struct vs_sbuf { char *p; size_t len, cap; int failed; } vs_sbuf;

void vs_sb_put(vs_sbuf *b, const char *s, size_t n);
void vs_sb_puts(vs_sbuf *b, const char *s);
void vs_sb_printf(vs_sbuf *b, const char *fmt, ...) VS_PRINTF(2, 3);
void vs_sb_u64(vs_sbuf *b, uint64_t v);
void vs_sb_i64(vs_sbuf *b, int64_t v);
void vs_sb_hex(vs_sbuf *b, uint64_t v);           /* 0x..., lower case */
void vs_sb_fixed(vs_sbuf *b, double v, int decimals);  /* locale-free, |v| < 1e15 */
void vs_sb_json_str(vs_sbuf *b, const char *s);   /* quoted, escaped */
void vs_sb_xml_str(vs_sbuf *b, const char *s);    /* &amp; &lt; &gt; &quot; escaped */
/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 when invalid. */
size_t vs_utf8_len(const unsigned char *s, size_t n);
/* Hands the text (NUL-terminated) to the caller; NULL when failed. */
char *vs_sb_take(vs_sbuf *b, size_t *len);
void vs_sb_free(vs_sbuf *b);

#endif
