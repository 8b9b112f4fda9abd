#!/bin/sh
# `cis2 selftest` prints the two spec digests (§6.6, §7.2) and PASS.
set -eu
. tests/lib.sh
out=$($CIS2 selftest)
echo "$out"
echo "$out" | grep -qx 'table_digest = 23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d'
echo "$out" | grep -qx 'inv_freq_table_digest = da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12'
echo "$out" | tail -n 1 | grep -qx 'selftest=PASS'
# usage errors exit 2
set +e
$CIS2 selftest extra 2>/dev/null; [ $? -eq 2 ] || fail "extra arg not rejected"
$CIS2 no-such-command 2>/dev/null; [ $? -eq 2 ] || fail "unknown command"
$CIS2 2>/dev/null; [ $? -eq 2 ] || fail "no command"
echo ok
