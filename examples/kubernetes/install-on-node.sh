#!/bin/sh
# Run by the DaemonSet (daemonset.yaml) on every GPU node, from the installer
# image (Dockerfile here), which has the vramshim .deb installed. It lays out
# on the node, under $HOST_ROOT (the node's / mounted into the pod):
#   /opt/vramshim/lib/libvramshim.so   the shim
#   /opt/vramshim/lib/libinih.so.1     its one library beyond libc: workload
#                                      images rarely have it, so pods preload
#                                      both (LD_PRELOAD names it first)
#   /opt/vramshim/bin/vramshim         the tool (status, dump, check)
#   /opt/vramshim/etc/vramshim.conf    the config, from the ConfigMap
#   /run/vramshim                      the ledger directory, root:$VRAMSHIM_GID 2770
# Files are replaced by rename, so a process that has the old library mapped
# keeps it; a new process gets the new one. Idempotent.
set -eu
HOST_ROOT=${HOST_ROOT:-/host}
GID=${VRAMSHIM_GID:?set VRAMSHIM_GID: the group id that may use the ledger}
CONFIG=${VRAMSHIM_CONFIG_SRC:-/config/vramshim.conf}
LIBDIR=$(dirname "$(readlink -f /usr/lib/*/libvramshim.so.0)")
dest=$HOST_ROOT/opt/vramshim

put() { # put SRC DEST MODE: copy next to DEST, then rename over it
  install -D -m "$3" "$1" "$2.new.$$"
  mv -f "$2.new.$$" "$2"
}
put "$(readlink -f "$LIBDIR/libvramshim.so.0")" "$dest/lib/libvramshim.so" 0644
put "$(readlink -f "$LIBDIR/libinih.so.1")" "$dest/lib/libinih.so.1" 0644
put /usr/bin/vramshim "$dest/bin/vramshim" 0755
if [ -f "$CONFIG" ]; then
  /usr/bin/vramshim check "$CONFIG" >/dev/null   # a bad config never reaches the node
  put "$CONFIG" "$dest/etc/vramshim.conf" 0644
fi
# /run is a tmpfs: made again at every boot, when this pod starts again.
mkdir -p "$HOST_ROOT/run/vramshim"
chown "0:$GID" "$HOST_ROOT/run/vramshim"
chmod 2770 "$HOST_ROOT/run/vramshim"
echo "vramshim: installed on $(cat "$HOST_ROOT/etc/hostname" 2>/dev/null || echo this node): $dest, ledger $HOST_ROOT/run/vramshim (group $GID)"
