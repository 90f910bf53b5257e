#!/usr/bin/env bash
# Writes a test CA and certificates signed by it into DIR (default
# target/tls): ca.crt/ca.key, server.crt/server.key (for localhost and
# 127.0.0.1, usable as server and client certificate), client.crt/
# client.key (client only), and redis.dh (DH parameters, which Redis's
# test harness passes as tls-dh-params-file). For tests and benchmarks
# only: the keys are unencrypted and the CA is throwaway.
#
#   scripts/gen-tls-certs.sh [DIR]
#
# Installs openssl from Debian's packages if it is missing. Existing files
# in DIR are kept (delete DIR to make new ones).
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")/.." && pwd)/target/tls}"
if ! command -v openssl >/dev/null; then
  apt-get update -qq && apt-get install -y -qq openssl >/dev/null
fi
mkdir -p "$dir"
cd "$dir"
if [ -s ca.crt ] && [ -s server.crt ] && [ -s client.crt ] && [ -s redis.dh ]; then
  exit 0
fi

# An EC P-256 key: quick to make, and every TLS client takes it.
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/O=Ferrite test/CN=Ferrite test CA" -out ca.crt

# sign NAME CN EXTENDED_KEY_USAGE
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/O=Ferrite test/CN=$2" -out "$1.csr"
  cat > "$1.ext" <<EXT
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = $3
subjectAltName = DNS:localhost, IP:127.0.0.1
EXT
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -sha256 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
sign server "Server" "serverAuth, clientAuth"
sign client "Client" "clientAuth"
openssl dhparam -dsaparam -out redis.dh 2048 2>/dev/null
chmod 600 ./*.key
echo "certificates in $dir"
