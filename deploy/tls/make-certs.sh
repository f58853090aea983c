#!/usr/bin/env bash
# Makes a private CA and one certificate per specserve server for mutual TLS
# between the coordinator and the services (deploy/k8s/components/mtls), and
# prints the kubectl commands that store them as Secrets.
#
#   bash deploy/tls/make-certs.sh OUTDIR [NAMESPACE]
#
# Each certificate is good for both ends of a connection (serverAuth and
# clientAuth) and names its Service: specserve-target, specserve-target.NS.svc,
# specserve-target.NS.svc.cluster.local, plus localhost and 127.0.0.1 for
# tests. For production prefer cert-manager: its Certificate Secrets carry the
# same tls.crt / tls.key / ca.crt keys.
set -euo pipefail
out=${1:?usage: make-certs.sh OUTDIR [NAMESPACE]}
ns=${2:-specserve}
days=${DAYS:-365}
mkdir -p "$out"
cd "$out"
umask 077

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" -subj "/CN=specserve-ca" \
  -keyout ca.key -out ca.crt -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

for name in target draft coordinator; do
  svc=specserve-$name
  cat >"$name.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:$svc,DNS:$svc.$ns,DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local,DNS:localhost,IP:127.0.0.1
EXT
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$svc" -keyout "$name.key" -out "$name.csr" 2>/dev/null
  openssl x509 -req -sha256 -days "$days" -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
done
rm -f ca.srl
chmod 644 ./*.crt

echo "certificates in $out; store them in namespace $ns with:" >&2
for name in target draft coordinator; do
  echo "kubectl -n $ns create secret generic specserve-$name-tls" \
       "--from-file=tls.crt=$out/$name.crt --from-file=tls.key=$out/$name.key --from-file=ca.crt=$out/ca.crt"
done
