#!/usr/bin/env bash
# The configs the documentation shows are valid: the README's annotated
# example and examples/config/vramshim.conf, checked by `vramshim check`
# against the 24 GiB card they describe, and the Windows example
# (examples/windows/vramshim.conf, packed in the ZIP) against its 3 GiB card.
set -euo pipefail
tool=$1 src=$2 work=$3
mkdir -p "$work"
sed -n '/^    ; \/etc\/vramshim.conf/,/^    limit = 512MiB/p' "$src/README.md" | sed 's/^    //' >"$work/readme.conf"
[ -s "$work/readme.conf" ] || { echo "no example config found in README.md"; exit 1; }
for f in "$work/readme.conf" "$src/examples/config/vramshim.conf"; do
  "$tool" check "$f" --card-capacity 24GiB >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; echo "invalid: $f"; exit 1; }
  grep -q "is valid" "$work/out.txt" || { cat "$work/out.txt"; exit 1; }
  echo "valid: $f"
done
"$tool" check "$src/examples/windows/vramshim.conf" --card-capacity 3GiB >"$work/out.txt" 2>&1 ||
  { cat "$work/out.txt"; echo "invalid: $src/examples/windows/vramshim.conf"; exit 1; }
grep -q "is valid" "$work/out.txt" || { cat "$work/out.txt"; exit 1; }
echo "valid: $src/examples/windows/vramshim.conf"
