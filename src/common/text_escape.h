/* Text that came from outside the shim (tenant names, executable names,
 * paths, UUIDs read from a ledger file) printed in a text output (the log,
 * `vramshim status`, the dump text view): its control characters are
 * escaped, so a name cannot forge or break lines. "\n", "\r", "\t" are
 * written as such, other bytes below 0x20 and 0x7f as "\xNN"; every other
 * byte is kept. Machine-readable outputs escape through their own writer
 * (src/explain/json.c). */
#ifndef VS_TEXT_ESCAPE_H
#define VS_TEXT_ESCAPE_H
#include <stddef.h>

/* Escapes inlen bytes of in into out (outlen > 0; always NUL-terminated,
 * cut at a whole escape when out is too small); returns the length written. */
size_t vs_text_escape_n(const char *in, size_t inlen, char *out, size_t outlen);
/* The same for a NUL-terminated string; returns out. */
const char *vs_text_escape(const char *in, char *out, size_t outlen);
#endif
