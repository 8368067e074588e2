/* launch.h on POSIX: LD_PRELOAD and exec. */
#include "file.h"
#include "launch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

const char vs_plat_shim_file[] = "libvramshim.so";
const char vs_plat_launch_how[] = "LD_PRELOAD gets libvramshim.so first, then execs it";

void vs_plat_self_dir(char *out, size_t len) {
  char path[PATH_MAX];
  out[0] = 0;
  if (vs_plat_self_exe(path, sizeof path)) return;
  size_t dir = (size_t)(vs_plat_base_name(path) - path);
  if (dir) snprintf(out, len, "%.*s", (int)dir, path);
}

int vs_plat_readable(const char *path) { return path && *path && access(path, R_OK) == 0; }

int vs_plat_canonical(const char *path, char *out, size_t len) {
  char folder[PATH_MAX], real[PATH_MAX];
  snprintf(folder, sizeof folder, "%s", path);
  char *slash = strrchr(folder, '/');
  if (!slash) {
    errno = EINVAL;
    return -1;
  }
  *slash = 0;
  if (!realpath(*folder ? folder : "/", real)) return -1;
  snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", slash + 1);
  return 0;
}

int vs_plat_realpath(const char *path, char *out, size_t len) {
  char real[PATH_MAX];
  if (!realpath(path, real)) return -1;
  snprintf(out, len, "%s", real);
  return 0;
}

int vs_plat_setenv(const char *name, const char *value) { return setenv(name, value, 1); }

/* prog as execvp finds it: a name with a slash as given, else the first
 * executable regular file of that name in PATH (its default when unset). */
static int find_program(const char *prog, char *out, size_t len) {
  struct stat st;
  if (strchr(prog, '/')) {
    snprintf(out, len, "%s", prog);
    return 0;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/bin:/usr/bin";
  for (const char *p = path; *p;) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    /* An empty entry is the current folder, as for execvp. */
    if (snprintf(out, len, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", prog) < (int)len && stat(out, &st) == 0 &&
        S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return 0;
    p += n + (end ? 1 : 0);
  }
  return -1;
}

/* 1 where the ELF program at fd has a program interpreter (the dynamic
 * loader), 0 where it has none (static), -1 where it cannot tell or it is
 * no program (an object file, a core); *bits gets its class (32 or 64). */
static int elf_dynamic(int fd, int *bits) {
  /* Both classes' headers begin with e_ident: one read serves either. */
  union {
    unsigned char ident[EI_NIDENT];
    Elf64_Ehdr h64;
    Elf32_Ehdr h32;
  } u;
  ssize_t got = pread(fd, &u, sizeof u, 0);
  if (got < (ssize_t)EI_NIDENT || memcmp(u.ident, ELFMAG, SELFMAG)) return -1;
  uint64_t phoff;
  unsigned phnum, phentsize, etype;
  if (u.ident[EI_CLASS] == ELFCLASS64 && got >= (ssize_t)sizeof u.h64) {
    etype = u.h64.e_type, phoff = u.h64.e_phoff, phnum = u.h64.e_phnum, phentsize = u.h64.e_phentsize;
    *bits = 64;
  } else if (u.ident[EI_CLASS] == ELFCLASS32 && got >= (ssize_t)sizeof u.h32) {
    etype = u.h32.e_type, phoff = u.h32.e_phoff, phnum = u.h32.e_phnum, phentsize = u.h32.e_phentsize;
    *bits = 32;
  } else {
    return -1;
  }
  if (etype != ET_EXEC && etype != ET_DYN) return -1;
  /* p_type is the first word of either class's program header. */
  for (unsigned i = 0; i < phnum && i < 4096; i++) {
    uint32_t type;
    if (pread(fd, &type, sizeof type, (off_t)(phoff + (uint64_t)i * phentsize)) != (ssize_t)sizeof type) return -1;
    if (type == PT_INTERP) return 1;
  }
  return 0;
}

int vs_plat_launch_unreached(const char *prog, char *why, size_t len) {
  char path[PATH_MAX];
  struct stat st;
  if (!prog || find_program(prog, path, sizeof path) || stat(path, &st)) return 0;
  /* The bits change the process's ids (and so make the loader secure) only
   * where the file system honours them. */
  struct statvfs fs;
  int suid = (st.st_mode & S_ISUID) && st.st_uid != geteuid(), sgid = (st.st_mode & S_ISGID) && st.st_gid != getegid();
  if ((suid || sgid) && !(statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOSUID))) {
    snprintf(why, len, "%s is set-%s-ID: the loader runs it in secure-execution mode, which ignores the shim in "
             "LD_PRELOAD", path, suid ? "user" : "group");
    return 1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int bits = 0, dyn = elf_dynamic(fd, &bits);
  close(fd);
  if (dyn == 0) {
    snprintf(why, len, "%s is statically linked: no dynamic loader reads LD_PRELOAD for it", path);
    return 1;
  }
  if (dyn == 1 && bits == 32 && sizeof(void *) == 8) {
    snprintf(why, len, "%s is a 32-bit program: the loader cannot load the 64-bit shim into it", path);
    return 1;
  }
  return 0;
}

/* LD_PRELOAD = shim, then what was there (minus the shim itself: once is enough). */
static int set_preload(const char *shim) {
  const char *old = getenv("LD_PRELOAD");
  size_t cap = strlen(shim) + (old ? strlen(old) : 0) + 2;
  char *v = malloc(cap);
  if (!v) return -1;
  snprintf(v, cap, "%s", shim);
  if (old) {
    char *copy = strdup(old), *save = NULL;
    if (!copy) {
      free(v);
      return -1;
    }
    /* ld.so separates LD_PRELOAD entries by ':' or blanks. */
    for (char *tok = strtok_r(copy, ": \t", &save); tok; tok = strtok_r(NULL, ": \t", &save)) {
      if (!strcmp(tok, shim)) continue;
      strcat(v, ":");
      strcat(v, tok);
    }
    free(copy);
  }
  int r = setenv("LD_PRELOAD", v, 1);
  free(v);
  return r;
}

int vs_plat_launch(const char *shim, char *const argv[], int *exit_code, char *why, size_t len) {
  (void)exit_code;
  if (set_preload(shim)) {
    snprintf(why, len, "cannot set LD_PRELOAD: %s", strerror(errno));
    return -1;
  }
  fflush(NULL);
  execvp(argv[0], argv);
  snprintf(why, len, "cannot run '%s': %s", argv[0], strerror(errno));
  return -1;
}
