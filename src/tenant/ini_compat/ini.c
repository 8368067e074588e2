/* See ini.h: inih's default behaviour, written here. */
#include "ini.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

#define LINE_MAX_BYTES 200
#define SECTION_MAX 50
#define NAME_MAX_BYTES 50

static char *rstrip(char *s) {
  char *p = s + strlen(s);
  while (p > s && isspace((unsigned char)p[-1])) *--p = 0;
  return s;
}

static char *lskip(const char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return (char *)s;
}

/* The first of chars (any of them; none: only a comment ends it) or an
 * inline comment (';' at the start or after a blank), else the end. */
static char *find_stop(const char *s, const char *chars) {
  int was_space = 0;
  while (*s && (!chars || !strchr(chars, *s)) && !(was_space && *s == ';')) {
    was_space = isspace((unsigned char)*s);
    s++;
  }
  return (char *)s;
}

static void copy_cut(char *dst, const char *src, size_t size) {
  size_t n = strlen(src);
  if (n >= size) n = size - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

int ini_parse_stream(ini_reader reader, void *stream, ini_handler handler, void *user) {
  char line[LINE_MAX_BYTES];
  char section[SECTION_MAX] = "", prev_name[NAME_MAX_BYTES] = "";
  int lineno = 0, error = 0;
  while (reader(line, (int)sizeof line, stream)) {
    lineno++;
    char *start = line;
    if (lineno == 1 && (unsigned char)start[0] == 0xEF && (unsigned char)start[1] == 0xBB &&
        (unsigned char)start[2] == 0xBF)
      start += 3;
    start = lskip(rstrip(start));
    if (*start == ';' || *start == '#') continue;
    if (*prev_name && *start && start > line) {
      /* A line starting with blanks continues the previous key's value. */
      char *end = find_stop(start, NULL);
      if (*end) *end = 0;
      rstrip(start);
      if (!handler(user, section, prev_name, start) && !error) error = lineno;
    } else if (*start == '[') {
      char *end = find_stop(start + 1, "]");
      if (*end == ']') {
        *end = 0;
        copy_cut(section, start + 1, sizeof section);
        *prev_name = 0;
      } else if (!error) {
        error = lineno;
      }
    } else if (*start) {
      char *end = find_stop(start, "=:");
      if (*end == '=' || *end == ':') {
        *end = 0;
        char *name = rstrip(start), *value = end + 1;
        end = find_stop(value, NULL);
        if (*end) *end = 0;
        value = lskip(value);
        rstrip(value);
        copy_cut(prev_name, name, sizeof prev_name);
        if (!handler(user, section, name, value) && !error) error = lineno;
      } else if (!error) {
        error = lineno;
      }
    }
  }
  return error;
}

struct string_stream {
  const char *p;
};

static char *string_reader(char *str, int num, void *stream) {
  struct string_stream *ss = stream;
  if (!*ss->p || num < 2) return NULL;
  int i = 0;
  while (i < num - 1 && ss->p[i]) {
    str[i] = ss->p[i];
    if (ss->p[i++] == '\n') break;
  }
  str[i] = 0;
  ss->p += i;
  return str;
}

int ini_parse_string(const char *string, ini_handler handler, void *user) {
  struct string_stream ss = {string};
  return ini_parse_stream(string_reader, &ss, handler, user);
}
