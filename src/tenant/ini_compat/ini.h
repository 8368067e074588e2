/* A small INI reader for the Windows build, in place of inih.
 *
 * Why: the Linux build uses Debian's inih (libinih-dev), as the project's
 * rules ask; Debian packages no MinGW build of it and its source package
 * is not reachable from this build machine's mirror, so the Windows build
 * cannot link inih. This file gives the part of inih's interface that
 * src/tenant/config.c uses, with inih's default behaviour (the one
 * Debian's libinih 55 is built with): comments start with ';' or '#',
 * inline comments with ';' after a blank, '=' or ':' between key and
 * value, a UTF-8 BOM skipped on line 1, a line starting with blanks after
 * a key continues that key's value, sections and names cut at 49 bytes,
 * every line is read (no stop at the first error) and the first error's
 * line number is returned, the reader is given 200-byte lines.
 * tests/tenant/test_ini_compat.c proves that it and Debian's inih hand the
 * same calls to the handler, and return the same, for every example config
 * and a set of odd inputs. Only the Windows build compiles it
 * (cmake/windows.cmake). */
#ifndef VS_INI_COMPAT_H
#define VS_INI_COMPAT_H

/* 1 to go on, 0 for an error at this line. */
typedef int (*ini_handler)(void *user, const char *section, const char *name, const char *value);
/* fgets-like: the next line into str (at most num bytes), or NULL at the end. */
typedef char *(*ini_reader)(char *str, int num, void *stream);

/* 0, the line number of the first error, or -2 (out of memory: never here). */
int ini_parse_stream(ini_reader reader, void *stream, ini_handler handler, void *user);
int ini_parse_string(const char *string, ini_handler handler, void *user);
#endif
