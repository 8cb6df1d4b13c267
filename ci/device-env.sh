# Source on a lent GPU machine (no network): unpacks the .debs that ci/carry-deps.sh fetched into a
# private prefix (never into /) and points CMake and the loader at it.
_perfgate_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_perfgate_prefix="$_perfgate_root/.carry/prefix"
if [ -d "$_perfgate_root/.carry/debs" ] && [ ! -d "$_perfgate_prefix" ]; then
  for deb in "$_perfgate_root"/.carry/debs/*.deb; do dpkg -x "$deb" "$_perfgate_prefix"; done
fi
if [ -d "$_perfgate_prefix" ]; then
  export PERFGATE_DEPS_PREFIX="$_perfgate_prefix/usr"
  export LD_LIBRARY_PATH="$_perfgate_prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# NVLink multicast stays off on shared hosts (device notes).
export NCCL_NVLS_ENABLE=0
unset _perfgate_root _perfgate_prefix
# The lent machines have no network: the package check would only wait for apt to time out.
export PERFGATE_SKIP_SETUP=1
