#!/usr/bin/env bash
# Install, start and stop the two real RabbitMQ brokers the tests and captures use.
#   rabbit3: Debian bookworm's rabbitmq-server 3.10.8, stream port 5552 (host), and a TLS
#            stream listener on 5551 (a self-signed CA and certificates made with openssl
#            into $TLS_DIR, git-ignored; SASL EXTERNAL for a client certificate, CN guest)
#   rabbit4: Debian trixie's rabbitmq-server 4.0.x, stream port 5553 (debootstrap chroot),
#            TLS stream listener on 5554 with the same certificates and EXTERNAL
# Everything listens on 127.0.0.1 only. Idempotent: a running broker is left alone, unless
# its TLS listener is down or the certificates changed: then it is restarted (if this script
# started it).
# Usage: scripts/brokers.sh start|stop|status [rabbit3|rabbit4|both] [force]
#   stop only stops what this script started, unless "force" is given.
set -euo pipefail

CHROOT=${STREAMDISSECT_CHROOT:-/srv/trixie}
MIRROR=${STREAMDISSECT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
STATE_DIR=${STREAMDISSECT_STATE:-/var/tmp/streamdissect-brokers}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TLS_DIR=${STREAMDISSECT_TLS_DIR:-$REPO/.tls}    # ca.pem, server.*, client.* (tests read them)
mkdir -p "$STATE_DIR"

log() { echo "[brokers] $*" >&2; }

port_open() {  # port -> 0 when something accepts on 127.0.0.1:port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_port() {  # port seconds
  local i
  for ((i = 0; i < $2; i++)); do
    port_open "$1" && return 0
    sleep 1
  done
  log "port $1 did not open within $2 s"
  return 1
}

write_config() {  # root amqp_port stream_port node dist_port [extra rabbitmq.conf lines]
  local root=$1
  mkdir -p "$root/etc/rabbitmq"
  cat > "$root/etc/rabbitmq/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$2
stream.listeners.tcp.1 = 127.0.0.1:$3
stream.advertised_host = 127.0.0.1
stream.advertised_port = $3
loopback_users.guest = true
${6:-}
CONF
  cat > "$root/etc/rabbitmq/rabbitmq-env.conf" <<CONF
NODENAME=$4@localhost
NODE_IP_ADDRESS=127.0.0.1
DIST_PORT=$5
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
CONF
  echo '[rabbitmq_stream].' > "$root/etc/rabbitmq/enabled_plugins"
}

install_host_packages() {
  local missing=()
  command -v /usr/lib/rabbitmq/bin/rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)
  command -v tcpdump >/dev/null 2>&1 || missing+=(tcpdump)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v tshark >/dev/null 2>&1 || missing+=(tshark)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)  # (Spark's JVM)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -q >/dev/null
  apt-get install -y -q "${missing[@]}" >/dev/null
}

# ---- TLS for rabbit3: a CA, a server certificate (127.0.0.1, localhost), a client one ------
cert_ok() {  # file -> 0 when it exists and stays valid for another day
  [ -s "$1" ] && openssl x509 -checkend 86400 -noout -in "$1" >/dev/null 2>&1
}

sign() {  # name subject extensions: a key and a certificate signed by the CA
  openssl req -new -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  printf '%s\n' "$3" "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid,issuer" \
    "basicConstraints=critical,CA:FALSE" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
    -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

make_certs() {  # idempotent: made once into $TLS_DIR, remade only when missing or expiring
  command -v openssl >/dev/null 2>&1 || install_host_packages
  if cert_ok "$TLS_DIR/ca.pem" && cert_ok "$TLS_DIR/server.pem" && cert_ok "$TLS_DIR/client.pem"; then
    return 0
  fi
  log "making a test CA and certificates in $TLS_DIR"
  mkdir -p "$TLS_DIR"
  (
    cd "$TLS_DIR"
    umask 077
    rm -f ./*.pem ./*.key ./*.srl
    openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.pem \
      -subj "/CN=streamdissect test CA" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    sign server "/CN=localhost" "subjectAltName=IP:127.0.0.1,DNS:localhost
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth"
    sign client "/CN=guest" "keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
    chmod 644 ca.pem server.pem client.pem
  )
}

install_broker_tls() {  # root -> 0 when the broker's copies changed (it must restart)
  local dir="$1/etc/rabbitmq/tls" f changed=1
  mkdir -p "$dir"
  for f in ca.pem server.pem server.key; do
    cmp -s "$TLS_DIR/$f" "$dir/$f" && continue
    install -m 600 "$TLS_DIR/$f" "$dir/$f"
    changed=0
  done
  # (the chroot's rabbitmq user has its own uid)
  if [ -z "$1" ]; then chown -R rabbitmq:rabbitmq "$dir"; else in_chroot 'chown -R rabbitmq:rabbitmq /etc/rabbitmq/tls'; fi
  return $changed
}

tls_conf() {  # tls_port mechanisms... -> rabbitmq.conf lines: the TLS stream listener, EXTERNAL
  local n=0 m
  cat <<CONF
stream.listeners.ssl.1 = 127.0.0.1:$1
ssl_options.cacertfile = /etc/rabbitmq/tls/ca.pem
ssl_options.certfile = /etc/rabbitmq/tls/server.pem
ssl_options.keyfile = /etc/rabbitmq/tls/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
ssl_cert_login_from = common_name
CONF
  shift
  for m in "$@"; do n=$((n + 1)); echo "auth_mechanisms.$n = $m"; done
}

restart_for_tls() {  # name port tls_port tls_changed -> 0 when the broker is to be (re)started
  if port_open "$2"; then
    if port_open "$3" && [ "$4" = 1 ]; then
      log "$1 already answers on $2 (TLS on $3)"
      return 1
    fi
    if ! started_here "$1"; then
      log "$1 already answers on $2, without the current TLS listener on $3"
      return 1
    fi
    log "restarting $1 to apply the TLS listener on $3 (certificates in $TLS_DIR)"
    "stop_$1"
  fi
  return 0
}

# ---- rabbit3: the host's 3.10.8 ------------------------------------------------------------
start_rabbit3() {
  install_host_packages
  make_certs
  local tls_changed=1
  install_broker_tls "" && tls_changed=0
  restart_for_tls rabbit3 5552 5551 $tls_changed || return 0
  # (3.10's default mechanisms are PLAIN and AMQPLAIN)
  write_config "" 5672 5552 rabbit 25672 "$(tls_conf 5551 PLAIN AMQPLAIN EXTERNAL)"
  echo '[rabbitmq_stream,rabbitmq_auth_mechanism_ssl].' > /etc/rabbitmq/enabled_plugins
  chown rabbitmq:rabbitmq /etc/rabbitmq/enabled_plugins
  mkdir -p /var/log/rabbitmq && chown rabbitmq:rabbitmq /var/log/rabbitmq
  log "starting rabbit3 (3.10.8) on 127.0.0.1:5552, TLS on 127.0.0.1:5551"
  su rabbitmq -s /bin/sh -c 'export ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_PID_FILE=/var/lib/rabbitmq/rabbit.pid; cd /var/lib/rabbitmq; nohup /usr/lib/rabbitmq/bin/rabbitmq-server > /var/log/rabbitmq/startup_stdout.log 2>&1 &'
  su rabbitmq -s /bin/sh -c 'cd /var/lib/rabbitmq; /usr/lib/rabbitmq/bin/rabbitmqctl wait /var/lib/rabbitmq/rabbit.pid --timeout 90' >/dev/null
  wait_port 5552 60
  wait_port 5551 30
  touch "$STATE_DIR/rabbit3.started"
}

started_here() {  # name -> 0 when this script started it (or "force" was given)
  [ "$FORCE" = force ] || [ -e "$STATE_DIR/$1.started" ] && return 0
  log "$1 was not started by this script; leaving it up (add 'force' to stop it anyway)"
  return 1
}

kill_by_pidfile() {  # FILE NAME: the broker's beam killed by the pid its pid file holds
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  log "$2 did not stop in 120 s: killing pid $pid"
  kill -9 "$pid" 2>/dev/null || true
}

stop_rabbit3() {
  port_open 5552 || { log "rabbit3 not running"; rm -f "$STATE_DIR/rabbit3.started"; return 0; }
  started_here rabbit3 || return 0
  log "stopping rabbit3"
  # (bounded: a broker that does not stop must not hang the test run; then killed by its pid)
  timeout 120 su rabbitmq -s /bin/sh -c 'cd /var/lib/rabbitmq; /usr/lib/rabbitmq/bin/rabbitmqctl stop /var/lib/rabbitmq/rabbit.pid' >/dev/null \
    || kill_by_pidfile /var/lib/rabbitmq/rabbit.pid rabbit3
  rm -f "$STATE_DIR/rabbit3.started"
}

# ---- rabbit4: trixie's 4.0.x in a chroot ----------------------------------------------------
in_chroot() { chroot "$CHROOT" /bin/sh -c "$1"; }

mount_chroot() {
  mountpoint -q "$CHROOT/proc" || mount -t proc proc "$CHROOT/proc"
  mountpoint -q "$CHROOT/dev" || mount --bind /dev "$CHROOT/dev"
  mountpoint -q "$CHROOT/dev/pts" || mount --bind /dev/pts "$CHROOT/dev/pts"
}

install_rabbit4() {
  [ -x "$CHROOT/usr/lib/rabbitmq/bin/rabbitmq-server" ] && return 0
  install_host_packages
  if [ ! -x "$CHROOT/bin/sh" ]; then
    log "debootstrap trixie into $CHROOT (a few minutes)"
    mkdir -p "$CHROOT"
    debootstrap --variant=minbase --include=ca-certificates trixie "$CHROOT" "$MIRROR" >"$STATE_DIR/debootstrap.log" 2>&1 \
      || { tail -20 "$STATE_DIR/debootstrap.log" >&2; return 1; }
  fi
  cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' > "$CHROOT/usr/sbin/policy-rc.d"
  chmod +x "$CHROOT/usr/sbin/policy-rc.d"
  mount_chroot
  log "installing rabbitmq-server inside the chroot"
  in_chroot 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q rabbitmq-server' >"$STATE_DIR/chroot-apt.log" 2>&1 \
    || { tail -20 "$STATE_DIR/chroot-apt.log" >&2; return 1; }
}

start_rabbit4() {
  install_rabbit4
  mount_chroot
  make_certs
  local tls_changed=1
  install_broker_tls "$CHROOT" && tls_changed=0
  restart_for_tls rabbit4 5553 5554 $tls_changed || return 0
  mount_chroot
  # (4.0's default mechanisms are PLAIN, AMQPLAIN and ANONYMOUS: all kept)
  write_config "$CHROOT" 5673 5553 rabbit4 25673 "$(tls_conf 5554 AMQPLAIN PLAIN ANONYMOUS EXTERNAL)"
  echo '[rabbitmq_stream,rabbitmq_auth_mechanism_ssl].' > "$CHROOT/etc/rabbitmq/enabled_plugins"
  in_chroot 'chown rabbitmq:rabbitmq /etc/rabbitmq/enabled_plugins; mkdir -p /var/log/rabbitmq; chown rabbitmq:rabbitmq /var/log/rabbitmq'
  log "starting rabbit4 ($(in_chroot 'dpkg-query -W -f=\${Version} rabbitmq-server')) on 127.0.0.1:5553, TLS on 127.0.0.1:5554"
  in_chroot "su rabbitmq -s /bin/sh -c 'export ERL_EPMD_ADDRESS=127.0.0.1 ERL_EPMD_PORT=4370 RABBITMQ_PID_FILE=/var/lib/rabbitmq/rabbit4.pid; cd /var/lib/rabbitmq; nohup /usr/lib/rabbitmq/bin/rabbitmq-server > /var/log/rabbitmq/startup_stdout.log 2>&1 &'"
  in_chroot "su rabbitmq -s /bin/sh -c 'cd /var/lib/rabbitmq; ERL_EPMD_PORT=4370 /usr/lib/rabbitmq/bin/rabbitmqctl wait /var/lib/rabbitmq/rabbit4.pid --timeout 120'" >/dev/null
  wait_port 5553 60
  wait_port 5554 30
  touch "$STATE_DIR/rabbit4.started"
}

stop_rabbit4() {
  if port_open 5553; then
    started_here rabbit4 || return 0
    log "stopping rabbit4"
    timeout 120 chroot "$CHROOT" /bin/sh -c "su rabbitmq -s /bin/sh -c 'cd /var/lib/rabbitmq; ERL_EPMD_PORT=4370 /usr/lib/rabbitmq/bin/rabbitmqctl stop /var/lib/rabbitmq/rabbit4.pid'" >/dev/null \
      || kill_by_pidfile "$CHROOT/var/lib/rabbitmq/rabbit4.pid" rabbit4
  else
    log "rabbit4 not running"
  fi
  rm -f "$STATE_DIR/rabbit4.started"
  for m in "$CHROOT/dev/pts" "$CHROOT/dev" "$CHROOT/proc"; do
    mountpoint -q "$m" && umount "$m" 2>/dev/null || true
  done
}

status() {
  port_open 5552 && echo "rabbit3 up 127.0.0.1:5552" || echo "rabbit3 down"
  port_open 5551 && echo "rabbit3 TLS up 127.0.0.1:5551" || echo "rabbit3 TLS down"
  port_open 5553 && echo "rabbit4 up 127.0.0.1:5553" || echo "rabbit4 down"
  port_open 5554 && echo "rabbit4 TLS up 127.0.0.1:5554" || echo "rabbit4 TLS down"
}

action=${1:-status}
which=${2:-both}
FORCE=${3:-}
case "$action" in
  start)
    case "$which" in rabbit3) start_rabbit3 ;; rabbit4) start_rabbit4 ;; both) start_rabbit3; start_rabbit4 ;; *) exit 2 ;; esac ;;
  stop)
    case "$which" in rabbit3) stop_rabbit3 ;; rabbit4) stop_rabbit4 ;; both) stop_rabbit4; stop_rabbit3 ;; *) exit 2 ;; esac ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status [rabbit3|rabbit4]" >&2; exit 2 ;;
esac
