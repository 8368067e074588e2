/* The process's arguments and environment in UTF-8, the encoding every
 * other platform function takes for names and paths. POSIX: as given
 * (bytes pass through untouched). Windows: the C runtime's argv and getenv
 * are in the ANSI code page, which cannot name every path (a user folder in
 * Cyrillic on a Western system) and turns what it cannot into '?'; these
 * read the UTF-16 originals instead. */
#ifndef VS_PLAT_PROCENV_H
#define VS_PLAT_PROCENV_H

/* Replaces *argv (and *argc) with the command line in UTF-8, for main()
 * before it reads an argument. The new array lives until the process ends.
 * Left unchanged when the command line cannot be read. */
void vs_plat_utf8_args(int *argc, char ***argv);

/* getenv, in UTF-8. The string stays valid until the process ends (a
 * variable changed later gets a new string; the old one is kept, so a
 * caller still holding it reads what it read). NULL when unset. Windows:
 * the process's own environment block (what SetEnvironmentVariable
 * changed), not the C runtime's copy made at its start. */
const char *vs_plat_getenv(const char *name);
#endif
