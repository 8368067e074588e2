/* glibc's own dlsym, found with dlvsym (never through the public name,
 * which the shim overrides in posix/interpose.c). POSIX-internal. */
#ifndef VS_PLAT_POSIX_DLSYM_REAL_H
#define VS_PLAT_POSIX_DLSYM_REAL_H

typedef void *(*vs_dlsym_fn)(void *handle, const char *name);

/* The real dlsym; NULL only if no known glibc version provides it (said
 * once). Safe before any constructor ran. */
vs_dlsym_fn vs_real_dlsym_fn(void);

/* Lookup on a real handle (never RTLD_NEXT: the caller would be the shim). */
void *vs_real_dlsym(void *handle, const char *name);

#endif
