#!/bin/sh
# Scans a TLS listener with Debian's testssl.sh (package testssl.sh, command `testssl`) and fails
# when any finding has severity HIGH or CRITICAL. Loopback or a host you own only.
#   scripts/testssl-scan.sh 127.0.0.1:8443 [report.json] [ca.crt]
# Checks: protocols, cipher categories, forward secrecy, server defaults (certificate), HTTP
# headers and the known vulnerabilities (Heartbleed, CCS, ROBOT, renegotiation, CRIME, BREACH,
# POODLE, SWEET32, FREAK, DROWN, LOGJAM, BEAST, LUCKY13, RC4); --fast skips the slowest variants.
# A certificate from a private CA (a test's) is trusted by passing that CA as the third argument.
# Every finding counts: the certificate's own (expiry, revocation info, chain) as well.
set -eu
target=${1:?usage: scripts/testssl-scan.sh HOST:PORT [report.json] [ca.crt]}
report=${2:-$(mktemp -d)/testssl.json}
ca=${3:-}
command -v testssl >/dev/null 2>&1 || { echo "testssl is not on PATH: apt-get install testssl.sh" >&2; exit 2; }
testssl --quiet --color 0 --warnings off --fast --sneaky --ip one \
  --protocols --standard --pfs --server-defaults --vulnerable \
  ${ca:+--add-ca "$ca"} --jsonfile "$report" "$target" >/dev/null 2>&1 || true
[ -s "$report" ] || { echo "testssl wrote no report to $report" >&2; exit 2; }
node -e '
  const findings = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const bad = findings.filter((f) => f.severity === "HIGH" || f.severity === "CRITICAL");
  const count = (s) => findings.filter((f) => f.severity === s).length;
  console.log(`testssl: ${findings.length} findings: CRITICAL ${count("CRITICAL")}, HIGH ${count("HIGH")}, MEDIUM ${count("MEDIUM")}, LOW ${count("LOW")}, OK ${count("OK")}, INFO ${count("INFO")} (report ${process.argv[1]})`);
  for (const f of bad) console.log(`  ${f.severity} ${f.id}: ${f.finding}`);
  process.exit(bad.length === 0 ? 0 : 1);
' "$report"
