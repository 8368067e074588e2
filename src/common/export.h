/* Symbol visibility. Every target is built with -fvisibility=hidden; only
 * what is marked VS_EXPORT can leave a shared library, and the version
 * script (cmake/libvramshim.map) narrows libvramshim.so further. */
#ifndef VS_EXPORT_H
#define VS_EXPORT_H
#define VS_EXPORT __attribute__((visibility("default")))
#endif
