#!/usr/bin/env bash
# The .deb on a clean Debian 12: `cpack -G DEB` in the build, then installed
# with dpkg into a fresh copy of a `debootstrap --variant=minbase bookworm`
# root, offline (libinih1's .deb is carried in, as README says), and used
# from the installed files only: `vramshim check`, a program under
# `vramshim run` over the simulated driver, HAMi-core's variable, the group
# and ledger directory made by postinst, no /etc/ld.so.preload, and purge.
#
#   package_test.sh BUILD_DIR SIM_LIBCUDA LIMIT_VIEW SRC_DIR
#
# The debootstrap root is cached (built once, ~1 min with a near mirror):
#   $VRAMSHIM_TEST_CACHE, else /var/cache/vramshim-test when writable, else
#   ${XDG_CACHE_HOME:-~/.cache}/vramshim-test; one folder per debootstrap
#   arguments (suite, variant, arch, mirror). Delete it to rebuild.
# The mirror: $VRAMSHIM_TEST_MIRROR, else the first Debian URL apt uses here.
# Exit 77 (skipped) with the reason when this cannot run here: not root, no
# debootstrap/chroot, the mirror unreachable.
set -uo pipefail
build=$1 sim=$2 view=$3 src=$4
say() { echo "vramshim-test: $*"; }
skip() { say "SKIP: $*"; exit 77; }
fail() { say "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, dpkg in the root)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (scripts/setup installs it)"
command -v dpkg-deb >/dev/null && command -v cpack >/dev/null || skip "no dpkg-deb or cpack"
arch=$(dpkg --print-architecture)

# ---- 1. the package -------------------------------------------------------
work=$build/tests/package/work
umount_all() {
  for m in "$work/root/proc" "$work/root/dev/shm"; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
}
umount_all
rm -rf --one-file-system "$work"
[ -e "$work" ] && fail "cannot remove $work (a mount left in it?)"
mkdir -p "$work/pkg"
t=$(now)
(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack -G DEB"; }
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")/\1/p' \
          "$build/CPackConfig.cmake" | head -1)
deb=$work/pkg/vramshim_${version}_${arch}.deb
[ -f "$deb" ] || { ls "$work/pkg"; fail "cpack made no $(basename "$deb")"; }
say "package built in $(secs "$t") s: $(basename "$deb") ($(stat -c %s "$deb") bytes)"
depends=$(dpkg-deb -f "$deb" Depends)
say "Depends: $depends"
case "$depends" in *libinih1*) ;; *) fail "Depends lacks libinih1: $depends" ;; esac
case "$depends" in *libc6*) ;; *) fail "Depends lacks libc6: $depends" ;; esac
for d in libsqlite3-0 libncursesw6; do   # record/history (SQLite) and top (ncurses), issue 26
  case "$depends" in *$d*) ;; *) fail "Depends lacks $d: $depends" ;; esac
done
listing=$(dpkg-deb -c "$deb")
for f in usr/lib/x86_64-linux-gnu/libvramshim.so.0 usr/bin/vramshim usr/include/vramshim.h \
         usr/lib/x86_64-linux-gnu/pkgconfig/vramshim.pc usr/lib/x86_64-linux-gnu/cmake/vramshim/vramshimConfig.cmake \
         usr/lib/tmpfiles.d/vramshim.conf usr/share/doc/vramshim/copyright usr/share/doc/vramshim/changelog.gz \
         usr/share/doc/vramshim/examples/config/vramshim.conf usr/share/doc/vramshim/README.md \
         usr/lib/systemd/system/vramshim-record.service usr/share/doc/vramshim/schemas/history.schema.json; do
  [ "$arch" = amd64 ] || f=${f//x86_64-linux-gnu/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)}
  grep -q " \./$f\( \|$\)" <<<"$listing" || fail "not in the package: /$f"
done
grep -q "etc/ld.so.preload" <<<"$listing" && fail "the package ships /etc/ld.so.preload"
if command -v lintian >/dev/null; then
  t=$(now)
  lint=$(lintian "$deb" 2>/dev/null)
  [ -n "$lint" ] && echo "$lint"
  lintian --fail-on error "$deb" >/dev/null 2>&1 || fail "lintian reports errors"
  say "lintian: $(grep -c '^E:' <<<"$lint") errors, $(grep -c '^W:' <<<"$lint") warnings ($(secs "$t") s)"
else
  say "lintian is not installed (scripts/setup installs it): not checked"
fi

# ---- 2. a clean Debian 12 root (cached) --------------------------------------
mirror=${VRAMSHIM_TEST_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
           grep -v '^\s*#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -1 | tr -d ' ')
fi
mirror=${mirror:-http://deb.debian.org/debian}
cache=${VRAMSHIM_TEST_CACHE:-}
if [ -z "$cache" ]; then
  if mkdir -p /var/cache/vramshim-test 2>/dev/null && [ -w /var/cache/vramshim-test ]; then
    cache=/var/cache/vramshim-test
  else
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/vramshim-test
  fi
fi
mkdir -p "$cache" || skip "cannot create the cache folder $cache"
key="bookworm-minbase-$arch-$(echo "$mirror" | sed 's|^[a-z]*://||; s|[^A-Za-z0-9.]|_|g')"
base=$cache/$key
exec 9>"$cache/$key.lock"
flock 9 # one builder at a time; the others wait and reuse its root
if [ ! -f "$base/.vramshim-complete" ]; then
  rm -rf "$base" "$base.tmp"
  say "making the Debian 12 root once: debootstrap --variant=minbase bookworm from $mirror into $base"
  t=$(now)
  if ! debootstrap --variant=minbase --arch="$arch" bookworm "$base.tmp" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -5 "$work/debootstrap.log"
    rm -rf "$base.tmp"
    if grep -qiE "Failed getting release file|Temporary failure|Could not resolve|unable to fetch|Connection" \
         "$work/debootstrap.log"; then
      skip "debootstrap cannot reach the mirror $mirror (set VRAMSHIM_TEST_MIRROR, or pre-fill $base)"
    fi
    fail "debootstrap failed (log: $work/debootstrap.log)"
  fi
  mv "$base.tmp" "$base" && touch "$base/.vramshim-complete"
  say "debootstrap took $(secs "$t") s ($(du -sh "$base" | cut -f1))"
else
  say "reusing the cached Debian 12 root $base"
fi
t=$(now)
cp -a "$base" "$work/root" || fail "cannot copy the cached root"
flock -u 9
root=$work/root
say "fresh copy of the root in $(secs "$t") s"
trap umount_all EXIT
mount -t proc proc "$root/proc" || skip "cannot mount /proc in the root (no privileges for mount)"
mkdir -p "$root/dev/shm" && mount -t tmpfs -o mode=1777 shm "$root/dev/shm" || skip "cannot mount /dev/shm in the root"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
grep -q 'VERSION_ID="12"' "$root/etc/os-release" || fail "the root is not Debian 12"

# ---- 3. install offline: libinih1 (and the tool's libsqlite3-0, libncursesw6) carried in, then the package ----
mkdir -p "$root/tmp/debs"
carried=1
for p in libinih1 libsqlite3-0 libncursesw6; do
  [ -n "$(in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed')" ] && continue
  got=$(ls /var/cache/apt/archives/${p}_*_"$arch".deb 2>/dev/null | head -1)
  if [ -z "$got" ]; then
    (cd "$root/tmp/debs" && apt-get download "$p:$arch" >/dev/null 2>&1) || true
  else
    cp "$got" "$root/tmp/debs/"
  fi
  ls "$root"/tmp/debs/${p}_*.deb >/dev/null 2>&1 || carried=0
done
cp "$deb" "$root/tmp/debs/"
t=$(now)
if [ $carried = 1 ]; then
  debs=()
  for f in "$root"/tmp/debs/*.deb; do debs+=("/tmp/debs/$(basename "$f")"); done
  in_root dpkg -i "${debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i in the root"; }
  say "installed offline with dpkg -i ($(ls "$root/tmp/debs" | sed 's/_.*//' | tr '\n' ' ')) in $(secs "$t") s"
else
  # No .deb of a dependency here: apt inside the root fetches them from the mirror.
  in_root apt-get update -qq >"$work/apt.log" 2>&1 || skip "no .deb of the dependencies here and apt cannot reach $mirror"
  in_root apt-get install -y -qq /tmp/debs/$(basename "$deb") >>"$work/apt.log" 2>&1 ||
    { cat "$work/apt.log"; fail "apt-get install of the package in the root"; }
  say "installed with apt (dependencies from $mirror) in $(secs "$t") s"
fi

# ---- 4. what the installed files do -------------------------------------------
# (Outputs are read whole before grep -q: with pipefail an early grep exit
# would make the writer's SIGPIPE a failure.)
out=$(in_root dpkg -s vramshim)
grep -q '^Status: install ok installed' <<<"$out" || fail "dpkg -s: not installed"
in_root getent group vramshim >/dev/null || fail "postinst made no group vramshim"
st=$(in_root stat -c '%a %U %G' /run/vramshim 2>/dev/null)
[ "$st" = "2770 root vramshim" ] || fail "/run/vramshim is '$st', expected '2770 root vramshim'"
say "postinst: group vramshim, /run/vramshim $st"
# The shared dump folder comes from systemd-tmpfiles only (never made by hand
# in a world-writable /var/tmp); the entry is what makes it 1777 root.
tf=$(cat "$root/usr/lib/tmpfiles.d/vramshim.conf")
grep -q '^d /var/tmp/vramshim 1777 root root -$' <<<"$tf" || fail "tmpfiles.d lacks the shared dump folder (1777 root)"
[ -e "$root/etc/ld.so.preload" ] && fail "the package wrote /etc/ld.so.preload"
[ -e "$root/etc/vramshim.conf" ] && fail "the package installed /etc/vramshim.conf (HAMi's variables would never apply)"
out=$(in_root ldconfig -p)
grep -q 'libvramshim.so.0 ' <<<"$out" || fail "ldconfig does not know libvramshim.so.0 (trigger)"
out=$(in_root vramshim check /usr/share/doc/vramshim/examples/config/vramshim.conf 2>&1) ||
  { echo "$out"; fail "vramshim check of the example config"; }
say "vramshim check of the installed example config: ok ($(echo "$out" | wc -l) lines)"
# The recorder's unit is installed, not enabled; record and history work from the installed files.
ls "$root"/etc/systemd/system/*/vramshim-record.service >/dev/null 2>&1 && fail "the package enabled vramshim-record"
mkdir -p "$root/tmp/ledger-empty" && chmod 700 "$root/tmp/ledger-empty" && printf '[global]\n' >"$root/tmp/empty.conf"
out=$(in_root vramshim record --once --db /tmp/h.db --ledger-dir /tmp/ledger-empty --config /tmp/empty.conf 2>&1 &&
      in_root vramshim history --db /tmp/h.db 2>&1) || { echo "$out"; fail "vramshim record --once / history"; }
say "vramshim-record.service installed, not enabled; record --once and history run"
out=$(in_root vramshim --version)
grep -q "^vramshim $version" <<<"$out" || fail "vramshim --version is not $version"

# The simulated driver and a test program, carried in like a real libcuda.
mkdir -p "$root/opt/vramsim"
cp "$sim" "$root/opt/vramsim/libcuda.so.1" && cp "$view" "$root/opt/vramsim/limit_view"
printf '[global]\nledger_dir = /run/vramshim\narena = vmm\n[tenant llm]\nlimit = 1GiB\n' >"$root/tmp/test.conf"
simenv=(LD_LIBRARY_PATH=/opt/vramsim VRAMSIM_CARDS=4GiB VRAMSIM_STATE=/tmp/vramsim.state)
out=$(in_root "${simenv[@]}" vramshim run --tenant llm --config /tmp/test.conf -- /opt/vramsim/limit_view \
      0=$((1 << 30)) 2>&1) || { echo "$out"; fail "a program under vramshim run (tenant llm, 1 GiB)"; }
grep -q "every card's view matches" <<<"$out" || { echo "$out"; fail "limit_view under vramshim run"; }
say "vramshim run --tenant llm --config: the program sees its 1 GiB limit"
[ -n "$(ls -A "$root/run/vramshim")" ] || fail "no ledger in /run/vramshim after a run"
out=$(in_root "${simenv[@]}" CUDA_DEVICE_MEMORY_LIMIT=512m vramshim run -- /opt/vramsim/limit_view \
      0=$((512 << 20)) 2>&1) || { echo "$out"; fail "HAMi's CUDA_DEVICE_MEMORY_LIMIT=512m under vramshim run"; }
say "CUDA_DEVICE_MEMORY_LIMIT=512m (no config file): the program sees 512 MiB"
out=$(in_root "${simenv[@]}" LD_PRELOAD=libvramshim.so.0 CUDA_DEVICE_MEMORY_LIMIT=256m /opt/vramsim/limit_view \
      0=$((256 << 20)) 2>&1) || { echo "$out"; fail "LD_PRELOAD=libvramshim.so.0 by its soname"; }
say "LD_PRELOAD=libvramshim.so.0 (found by ld.so in the multiarch libdir): ok"

# The Kubernetes node installer (examples/kubernetes/install-on-node.sh) run
# from the installed package, as its image runs it, onto a "node" folder.
cp "$src/examples/kubernetes/install-on-node.sh" "$root/tmp/install-on-node.sh"
in_root HOST_ROOT=/tmp/node VRAMSHIM_GID=4242 VRAMSHIM_CONFIG_SRC=/tmp/test.conf sh /tmp/install-on-node.sh \
  >"$work/node.log" 2>&1 || { cat "$work/node.log"; fail "install-on-node.sh"; }
for f in opt/vramshim/lib/libvramshim.so opt/vramshim/lib/libinih.so.1 opt/vramshim/bin/vramshim \
         opt/vramshim/etc/vramshim.conf; do
  [ -f "$root/tmp/node/$f" ] || fail "install-on-node.sh did not lay out /$f"
done
st=$(stat -c '%a %u %g' "$root/tmp/node/run/vramshim")
[ "$st" = "2770 0 4242" ] || fail "install-on-node.sh: the ledger directory is '$st', expected '2770 0 4242'"
say "install-on-node.sh (the DaemonSet's installer): /opt/vramshim laid out, ledger directory $st"

# ---- 5. remove and purge --------------------------------------------------------
in_root dpkg --purge vramshim >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge vramshim"; }
[ -e "$root/usr/bin/vramshim" ] && fail "/usr/bin/vramshim left after purge"
in_root getent group vramshim >/dev/null && fail "purge left the group vramshim (it has no users)"
say "purge: files and the unused group gone"

# A workload image without vramshim or libinih1, as on Kubernetes: the pod
# preloads both from the node's /opt/vramshim (pod-under-hami.yaml) and gets
# HAMi's limit.
in_root dpkg --purge libinih1 >>"$work/purge.log" 2>&1 || fail "dpkg --purge libinih1"
out=$(in_root ldconfig -p)
grep -q libinih <<<"$out" && fail "libinih is still on the library path"
pre="/tmp/node/opt/vramshim/lib/libinih.so.1 /tmp/node/opt/vramshim/lib/libvramshim.so"
out=$(in_root "${simenv[@]}" LD_PRELOAD="$pre" CUDA_DEVICE_MEMORY_LIMIT_0=1000m /opt/vramsim/limit_view \
      0=$((1000 << 20)) 2>&1) || { echo "$out"; fail "the node's /opt/vramshim preloaded with no package installed"; }
say "no package, no libinih1: LD_PRELOAD of the node's libinih.so.1 + libvramshim.so gives HAMi's 1000 MiB"
say "the package installs, runs and purges on a clean Debian 12"
