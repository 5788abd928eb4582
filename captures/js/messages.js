// The RabbitMQ Stream JavaScript client (npm rabbitmq-stream-js-client) publishes a few
// messages with AMQP properties, application properties and text/binary bodies to a fresh
// stream, consumes them back and deletes the stream.  Run by captures/scenarios/
// js_messages_3_10.py: `node messages.js PORT STREAM OUT.json` with NODE_PATH pointing at
// the node_modules holding the client.  OUT.json is the client side's own record: every
// byte each socket wrote and read (hex), what it sent and what its consumer handed over.
"use strict";

const net = require("net");
const rabbit = require("rabbitmq-stream-js-client");

const [port, stream, out] = process.argv.slice(2);
const nowNs = () => (BigInt(Date.now()) * 1000000n).toString();

// -- the bytes: every net.Socket's writes and "data" events, recorded as handed over
const sockets = [];
function recordOf(socket) {
  if (!socket._sdRecord) {
    socket._sdRecord = { c2s: [], s2c: [], opened_ns: nowNs(), closed_ns: null, closed: null };
    sockets.push(socket);
  }
  return socket._sdRecord;
}
const origWrite = net.Socket.prototype.write;
net.Socket.prototype.write = function (chunk, encoding, cb) {
  recordOf(this).c2s.push(Buffer.from(chunk, typeof encoding === "string" ? encoding : undefined));
  return origWrite.call(this, chunk, encoding, cb);
};
const origEmit = net.Socket.prototype.emit;
net.Socket.prototype.emit = function (event, ...args) {
  if (event === "connect") Object.assign(recordOf(this), { port: this.localPort, peer: this.remotePort });
  if (event === "data") recordOf(this).s2c.push(Buffer.from(args[0]));
  if (event === "close") {
    const r = recordOf(this);
    r.closed_ns = nowNs();
    r.closed = "tcp";
  }
  return origEmit.call(this, event, ...args);
};

// -- the messages: text and binary bodies, properties and application properties
const created = (s) => new Date(Date.UTC(2026, 10, 28, 12, 0, s, 250));
const binary = (n, seed) => Buffer.from(Array.from({ length: n }, (_, i) => (seed + i * 37) % 256));
const MESSAGES = [
  { body: Buffer.from("order 1 placed"),
    properties: { messageId: "js-1", subject: "order", contentType: "text/plain",
                  correlationId: "corr-1", creationTime: created(1) },
    applicationProperties: { region: "emea", qty: 3 } },
  { body: binary(16, 0),
    properties: { messageId: "js-2", subject: "blob", contentType: "application/octet-stream",
                  correlationId: "corr-2", creationTime: created(2) },
    applicationProperties: { region: "apac", qty: -7 } },
  { body: Buffer.from("order 2 shipped"),
    properties: { messageId: "js-3", subject: "order", contentType: "text/plain",
                  correlationId: "corr-1", creationTime: created(3) },
    applicationProperties: { region: "apac", qty: 42 } },
  { body: Buffer.from("naïve café ☕"),
    properties: { messageId: "js-4", subject: "note", contentType: "text/plain; charset=utf-8",
                  correlationId: "corr-4", creationTime: created(4) },
    applicationProperties: { region: "emea", qty: 1000000, lang: "fr" } },
  { body: binary(40, 200),
    properties: { messageId: "js-5", subject: "blob", contentType: "application/octet-stream",
                  correlationId: "corr-5", creationTime: created(5) },
    applicationProperties: { region: "emea", qty: 12 } },
  { body: Buffer.from("no properties, application properties only"),
    applicationProperties: { region: "amer", qty: 5 } },
];

const plainProperties = (p) => p && {
  message_id: p.messageId, subject: p.subject, content_type: p.contentType,
  correlation_id: p.correlationId,
  creation_time_ms: p.creationTime ? p.creationTime.getTime() : undefined,
};

async function main() {
  const startedNs = nowNs();
  const client = await rabbit.connect({
    hostname: "127.0.0.1", port: Number(port), username: "guest", password: "guest",
    vhost: "/", connectionName: "sd-js-messages",
  });
  await client.createStream({ stream });
  const publisher = await client.declarePublisher({ stream });
  // one message a Publish frame: each flushed and confirmed before the next is sent
  const confirmed = [];
  let onConfirm = () => {};
  publisher.on("publish_confirm", (err, ids) => {
    if (err) throw new Error("publish error " + err);
    confirmed.push(...ids.map(String));
    onConfirm();
  });
  const sent = [];
  for (const m of MESSAGES) {
    const opts = { applicationProperties: m.applicationProperties };
    if (m.properties) opts.messageProperties = m.properties;
    const want = sent.length + 1;
    const done = new Promise((res) => { onConfirm = () => { if (confirmed.length >= want) res(); }; });
    const r = await publisher.send(m.body, opts);
    await publisher.flush();
    await done;
    sent.push({ publishing_id: String(r.publishingId), properties: plainProperties(m.properties) || null,
                application_properties: m.applicationProperties, body_hex: m.body.toString("hex") });
  }

  const received = [];
  let gotAll;
  const allReceived = new Promise((res) => { gotAll = res; });
  const consumer = await client.declareConsumer({ stream, offset: rabbit.Offset.first() }, (msg) => {
    received.push({ offset: String(msg.offset), properties: plainProperties(msg.messageProperties) || null,
                    application_properties: msg.applicationProperties || null,
                    body_hex: msg.content.toString("hex") });
    if (received.length === MESSAGES.length) gotAll();
  });
  await allReceived;
  await consumer.close();
  await publisher.close();
  await client.deleteStream({ stream });
  await client.close();
  await new Promise((res) => setTimeout(res, 300)); // the sockets' close events
  const endedNs = nowNs();

  const connections = sockets.map((s) => {
    const r = s._sdRecord;
    return { client_port: r.port, server_port: r.peer,
             c2s_hex: Buffer.concat(r.c2s).toString("hex"), s2c_hex: Buffer.concat(r.s2c).toString("hex"),
             opened_ns: r.opened_ns, closed_ns: r.closed_ns, closed: r.closed };
  });
  require("fs").writeFileSync(out, JSON.stringify({
    client: "rabbitmq-stream-js-client " + require("rabbitmq-stream-js-client/package.json").version,
    node: process.version, stream, started_ns: startedNs, ended_ns: endedNs,
    sent, confirmed, received, connections,
  }, null, 1));
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
