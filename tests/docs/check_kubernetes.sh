#!/usr/bin/env bash
# The Kubernetes manifests of examples/kubernetes/ are valid against the
# schemas of Kubernetes itself (PyPI's kubernetes-validate bundles them:
# offline, --strict rejects unknown fields), and the validator catches a
# broken one. Skipped (77) when kubernetes-validate is not installed
# (scripts/setup installs it from PyPI).
#   check_kubernetes.sh PYTHON SRC WORK
set -uo pipefail
py=$1 src=$2 work=$3
"$py" -c 'import kubernetes_validate' 2>/dev/null ||
  { echo "vramshim-test: SKIP: kubernetes-validate is not installed for $py (pip install kubernetes-validate)"; exit 77; }
validate() { "$py" -c 'import sys; from kubernetes_validate.__main__ import main; sys.exit(main())' --strict "$@"; }
rm -rf "$work" && mkdir -p "$work"
fails=0
shopt -s nullglob
manifests=("$src"/examples/kubernetes/*.yaml)
[ ${#manifests[@]} -ge 3 ] || { echo "vramshim-test: FAIL: expected the DaemonSet and two pods"; exit 1; }
for f in "${manifests[@]}"; do
  if validate "$f" >"$work/out" 2>&1; then
    echo "vramshim-test: valid: $(basename "$f") ($(grep -c passed "$work/out") resources)"
  else
    cat "$work/out"; echo "vramshim-test: FAIL: $f"; fails=$((fails + 1))
  fi
done
for kind in DaemonSet Pod ConfigMap; do
  grep -qh "^kind: $kind$" "${manifests[@]}" || { echo "vramshim-test: FAIL: no $kind"; fails=$((fails + 1)); }
done
# The validator is not a rubber stamp: an unknown field fails.
sed 's/volumeMounts:/volumeMount:/' "$src/examples/kubernetes/pod-tenant.yaml" >"$work/broken.yaml"
if validate "$work/broken.yaml" >/dev/null 2>&1; then
  echo "vramshim-test: FAIL: a manifest with an unknown field passed"; fails=$((fails + 1))
fi
# The node installer is a valid POSIX shell script.
sh -n "$src/examples/kubernetes/install-on-node.sh" || { echo "vramshim-test: FAIL: install-on-node.sh"; fails=$((fails + 1)); }
[ $fails = 0 ]
