#!/bin/sh
# usage: check_zip.sh CPACK BUILD_WIN WORKDIR
# Runs cpack -G ZIP on the Windows build and checks the archive: one top
# folder vramshim-<version>-win64/ holding exactly package-files.txt's
# files, no simulated driver, the DLL and the tool real PE files.
set -eu
cpack=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
(cd "$build" && "$cpack" -G ZIP -B "$work" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
zip=$(ls "$work"/vramshim-*-win64.zip)
echo "archive: $zip"
python3 - "$zip" "$build/package-files.txt" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
want = sorted(l.strip() for l in open(sys.argv[2]) if l.strip())
names = [n for n in z.namelist() if not n.endswith('/')]
tops = {n.split('/')[0] for n in names}
ok = True
if len(tops) != 1 or not next(iter(tops)).endswith('-win64'):
    print('FAIL top folders:', sorted(tops)); ok = False
got = sorted(n.split('/', 1)[1] for n in names if '/' in n)
if got != want:
    print('FAIL files:', got, 'want', want); ok = False
if any(n.lower().endswith('nvcuda.dll') for n in names):
    print('FAIL the simulated driver is in the archive'); ok = False
for n in names:
    if n.endswith(('.dll', '.exe')) and z.read(n)[:2] != b'MZ':
        print('FAIL not a PE file:', n); ok = False
for n in names:
    print('  %8d  %s' % (z.getinfo(n).file_size, n))
sys.exit(0 if ok else 1)
PY
