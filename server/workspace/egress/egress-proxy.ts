import { randomBytes } from "node:crypto";
import { lookup } from "node:dns/promises";
import fs from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { EGRESS_PROXY_USER } from "@/server/workspace/gateway/egress-protocol";
import { checkAddresses, checkHost, type EgressPolicy, type EgressRefusalReason } from "./egress-policy";
import { rewriteHeaders, type EgressSecret } from "./egress-secrets";

/** One use of a workspace's network (a turn of an agent): its policy, its secrets, where refusals go. */
export type EgressGrant = {
  policy: EgressPolicy;
  secrets: readonly EgressSecret[];
  /** Every refused connection or request; counted and audited by the caller. Holds no secret value. */
  onRefused(refusal: EgressRefusal): void;
};

export type EgressRefusal = {
  host: string;
  port: number;
  method: string;
  reason: EgressRefusalReason;
  message: string;
  /** The secrets a refused request named (placeholders only). */
  secretNames?: string[];
};

type Resolve = (host: string) => Promise<string[]>;

const HOP_BY_HOP = [
  "proxy-authorization",
  "proxy-connection",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "upgrade",
  "transfer-encoding",
];

/**
 * The host side of a workspace's egress: an HTTP/1.1 forward proxy on a unix socket that the machine's
 * forwarder relays to (absolute-form requests for plain HTTP, CONNECT for tunnels). It resolves names
 * itself (the sandbox has no resolver and no route), checks the host and every resolved address against the
 * grant's policy, puts secret values into plain-HTTP headers toward bound hosts, and answers a refusal with
 * 403 and a line saying why. Each request names its grant by the proxy URL's credentials, so one proxy serves
 * every agent whose turns use the workspace in this process, each under its own policy.
 */
export class EgressProxy {
  private readonly grants = new Map<string, EgressGrant>();
  private readonly sockets = new Set<net.Socket>();
  private readonly server: http.Server;
  private listening: Promise<void> | null = null;

  constructor(
    readonly socketPath: string,
    private readonly resolve: Resolve = async (host) =>
      (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address),
  ) {
    this.server = http.createServer((req, res) => void this.onRequest(req, res));
    this.server.on("connect", (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      void this.onConnect(req, socket, head);
    });
    this.server.on("connection", (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
    });
  }

  /** Listens once; the socket is world-connectable (the sandbox uid differs), the grant token is the guard. */
  listen(): Promise<void> {
    this.listening ??= (async () => {
      await fs.rm(this.socketPath, { force: true });
      await new Promise<void>((resolve, reject) => {
        this.server.once("error", reject);
        this.server.listen(this.socketPath, () => resolve());
      });
      await fs.chmod(this.socketPath, 0o666);
    })();
    return this.listening;
  }

  /** Registers a grant; its token goes into the command's environment (never a secret value). */
  add(grant: EgressGrant): string {
    const token = randomBytes(24).toString("base64url");
    this.grants.set(token, grant);
    return token;
  }

  has(token: string): boolean {
    return this.grants.has(token);
  }

  remove(token: string): void {
    this.grants.delete(token);
  }

  get grantCount(): number {
    return this.grants.size;
  }

  async close(): Promise<void> {
    this.grants.clear();
    for (const socket of this.sockets) socket.destroy();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await fs.rm(this.socketPath, { force: true });
  }

  private grantOf(req: http.IncomingMessage): EgressGrant | null {
    const header = req.headers["proxy-authorization"] ?? "";
    const match = /^basic\s+(\S+)$/i.exec(header);
    if (!match) return null;
    const [user, token] = Buffer.from(match[1]!, "base64").toString("utf8").split(":");
    return user === EGRESS_PROXY_USER && token ? (this.grants.get(token) ?? null) : null;
  }

  /** Host and addresses checked; the address to dial, or the refusal (already reported). */
  private async admit(
    grant: EgressGrant,
    target: { host: string; port: number; method: string },
  ): Promise<{ address: string } | { refusal: EgressRefusal }> {
    const refuse = (reason: EgressRefusalReason, message: string) =>
      this.refused(grant, { ...target, reason, message });
    const byName = checkHost(grant.policy, target.host, target.port);
    if (!byName.allowed) return refuse(byName.reason, byName.message);
    const addresses = await this.resolve(target.host).catch(() => []);
    if (addresses.length === 0) return refuse("resolve_failed", `${target.host} did not resolve`);
    const byAddress = checkAddresses(grant.policy, target.host, target.port, addresses);
    if (!byAddress.allowed) return refuse(byAddress.reason, byAddress.message);
    return { address: addresses[0]! };
  }

  private refused(grant: EgressGrant, refusal: EgressRefusal): { refusal: EgressRefusal } {
    try {
      grant.onRefused(refusal);
    } catch {
      // Counting is the caller's; a failure there must not turn a refusal into a crash.
    }
    return { refusal };
  }

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const grant = this.grantOf(req);
    if (!grant)
      return answer(res, 407, "Berth egress proxy: this request carries no grant of this workspace\n");
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      return answer(res, 400, "Berth egress proxy: send absolute-form requests (http://host/path)\n");
    }
    const host = url.hostname.replace(/^\[|\]$/g, "");
    const port = Number(url.port || 80);
    const target = { host, port, method: req.method ?? "GET" };
    if (url.protocol !== "http:") {
      const { refusal } = this.refused(grant, {
        ...target,
        reason: "bad_request",
        message: `${url.protocol} requests go through CONNECT, not as absolute-form requests`,
      });
      return answer(res, 400, refusalText(refusal));
    }
    const headers: Record<string, string | string[] | undefined> = { ...req.headers };
    for (const name of HOP_BY_HOP) delete headers[name];
    const rewritten = rewriteHeaders(headers, grant.secrets, host);
    if ("names" in rewritten) {
      const { reason, message } = rewritten.verdict;
      const { refusal } = this.refused(grant, { ...target, reason, message, secretNames: rewritten.names });
      return answer(res, 403, refusalText(refusal));
    }
    const admitted = await this.admit(grant, target);
    if ("refusal" in admitted) return answer(res, 403, refusalText(admitted.refusal));
    const values = grant.secrets.filter((secret) => rewritten.used.includes(secret.name)).map((s) => s.value);
    const upstream = http.request({
      host: admitted.address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: rewritten.headers,
      setHost: false,
    });
    upstream.on("response", (reply) => {
      // A server echoing a credential back in a header must not hand the value to the workspace.
      res.writeHead(reply.statusCode ?? 502, scrub(reply.headers, values));
      reply.pipe(res);
    });
    upstream.on("error", (error) => {
      if (!res.headersSent)
        answer(res, 502, `Berth egress proxy: ${host}:${port} failed: ${error.message}\n`);
      else res.destroy();
    });
    req.pipe(upstream);
  }

  private async onConnect(req: http.IncomingMessage, client: net.Socket, head: Buffer): Promise<void> {
    client.on("error", () => undefined);
    const grant = this.grantOf(req);
    if (!grant)
      return rawAnswer(client, 407, "Berth egress proxy: this request carries no grant of this workspace\n");
    const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(req.url ?? "");
    if (!match) return rawAnswer(client, 400, "Berth egress proxy: CONNECT takes host:port\n");
    const target = { host: match[1]!, port: Number(match[2]), method: "CONNECT" };
    const admitted = await this.admit(grant, target);
    if ("refusal" in admitted) return rawAnswer(client, 403, refusalText(admitted.refusal));
    const upstream = net.connect(target.port, admitted.address);
    upstream.once("connect", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", (error) => {
      if (upstream.bytesRead === 0 && upstream.bytesWritten === 0) {
        rawAnswer(
          client,
          502,
          `Berth egress proxy: ${target.host}:${target.port} failed: ${error.message}\n`,
        );
      } else client.destroy();
    });
    client.once("close", () => upstream.destroy());
  }
}

function refusalText(refusal: EgressRefusal): string {
  return `Berth egress proxy refused ${refusal.method} ${refusal.host}:${refusal.port}: ${refusal.message} (${refusal.reason})\n`;
}

function answer(res: http.ServerResponse, status: number, text: string): void {
  const extra = status === 407 ? { "proxy-authenticate": 'Basic realm="berth"' } : {};
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", connection: "close", ...extra });
  res.end(text);
}

function rawAnswer(socket: net.Socket, status: number, text: string): void {
  const reason = http.STATUS_CODES[status] ?? "Error";
  const body = Buffer.from(text);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${text}`,
  );
}

function scrub(headers: http.IncomingHttpHeaders, values: readonly string[]): http.OutgoingHttpHeaders {
  if (values.length === 0) return headers;
  const clean = (text: string) => values.reduce((out, value) => out.split(value).join("[secret]"), text);
  return Object.fromEntries(
    Object.entries(headers).map(([key, value]) => [
      key,
      Array.isArray(value) ? value.map(clean) : typeof value === "string" ? clean(value) : value,
    ]),
  );
}
