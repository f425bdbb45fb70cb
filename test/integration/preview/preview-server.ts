/**
 * The app a preview test runs inside a workspace (Node is on every test machine: /usr is mounted into the
 * sandboxes and the base image has it): HTTP answers what it was asked (path, Host, cookies, forwarded
 * prefix) as JSON; an Upgrade is a minimal WebSocket echo (unmasked text frames under 126 bytes).
 */
export const PREVIEW_APP = String.raw`
const http = require("node:http");
const crypto = require("node:crypto");
const port = Number(process.argv[1]);
const server = http.createServer((req, res) => {
  res.setHeader("set-cookie", ["app=1; Path=/", "berth.session_token=stolen; Path=/"]);
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ path: req.url, host: req.headers.host, cookie: req.headers.cookie ?? "",
    prefix: req.headers["x-forwarded-prefix"] ?? "", authorization: req.headers.authorization ?? "" }));
});
server.on("upgrade", (req, socket) => {
  const accept = crypto.createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
  socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n");
  let buffered = Buffer.alloc(0);
  socket.on("data", (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 6) {
      const length = buffered[1] & 0x7f;
      if (buffered.length < 6 + length) return;
      const mask = buffered.subarray(2, 6);
      const payload = Buffer.from(buffered.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4]));
      const opcode = buffered[0] & 0x0f;
      buffered = buffered.subarray(6 + length);
      if (opcode === 8) return socket.end();
      const out = Buffer.from("echo:" + payload.toString());
      socket.write(Buffer.concat([Buffer.from([0x81, out.length]), out]));
    }
  });
});
server.listen(port, "127.0.0.1", () => console.log("listening " + port));
`;
