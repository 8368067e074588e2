#include "text_escape.h"

#include <stdio.h>
#include <string.h>

size_t vs_text_escape_n(const char *in, size_t inlen, char *out, size_t outlen) {
  size_t o = 0;
  for (size_t i = 0; i < inlen; i++) {
    unsigned char c = (unsigned char)in[i];
    char esc[5];
    size_t k;
    if (c == '\n') memcpy(esc, "\\n", k = 2);
    else if (c == '\r') memcpy(esc, "\\r", k = 2);
    else if (c == '\t') memcpy(esc, "\\t", k = 2);
    else if (c < 0x20 || c == 0x7f) k = (size_t)snprintf(esc, sizeof esc, "\\x%02x", c);
    else esc[0] = (char)c, k = 1;
    if (o + k + 1 > outlen) break;
    memcpy(out + o, esc, k);
    o += k;
  }
  out[o] = 0;
  return o;
}

const char *vs_text_escape(const char *in, char *out, size_t outlen) {
  vs_text_escape_n(in ? in : "", in ? strlen(in) : 0, out, outlen);
  return out;
}
