#!/usr/bin/env bash
# Prints the apt packages that hold the shared libraries the given binaries
# load (ldd, then dpkg -S), one per line. The images' build stages run it so
# that the runtime stages install exactly those packages, under whatever
# names the distribution gives them (Debian 12's libgrpc++1.51, Ubuntu
# 24.04's libgrpc++1.51t64, ...). Libraries ldd cannot find are reported on
# stderr and skipped (libcuda.so.1 comes from the driver at run time).
#
#   bash deploy/docker/runtime-packages.sh BINARY...
#   EXCLUDE_RE='^(cuda-|libcublas)' bash deploy/docker/runtime-packages.sh ...   # provided by the base image
set -euo pipefail
exclude=${EXCLUDE_RE:-^$}
declare -A pkgs=()
while read -r lib; do
  [ -n "$lib" ] || continue
  pkg=""
  # Merged /usr: dpkg may know the file under /lib or /usr/lib, or only
  # under the name of the symlink the soname is.
  for p in "$lib" "$(readlink -f "$lib")" "${lib/#\/lib\//\/usr\/lib\/}" "${lib/#\/usr\/lib\//\/lib\/}"; do
    if out=$(dpkg -S "$p" 2>/dev/null); then
      pkg=${out%%:*}
      break
    fi
  done
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package owns $lib (copy it into the image yourself)" >&2
    continue
  fi
  [[ $pkg =~ $exclude ]] || pkgs[$pkg]=1
done < <(for b in "$@"; do
           ldd "$b" | awk '/=> not found/ { print "runtime-packages: not found: " $1 > "/dev/stderr"; next }
                           /=> \// { print $3 }'
         done | sort -u)
printf '%s\n' "${!pkgs[@]}" | sort
