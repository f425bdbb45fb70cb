import type { IncomingMessage, Server } from "node:http";
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { z } from "zod";
import { toRouteError } from "@/server/api/error-mapping";
import { assertSameOriginUpgrade } from "@/server/api/request-origin";
import { resolveRequestPrincipal, resolveTenantScope } from "@/server/auth/resolve";
import type { Berth } from "@/server/composition/berth";
import type { TerminalHandle, TerminalSink } from "@/server/modules/terminal/terminal.service";
import { AppError } from "@/server/shared/errors";
import { requestMetaOf, runWithRequestMeta } from "@/server/shared/request-meta";
import { assertNoUnsafeStrings } from "@/server/shared/unsafe-strings";
import { parseJsonOrNull } from "@/server/shared/json";

/**
 * The dashboard terminal's transport: `GET /api/workspaces/:id/terminal?tenantSlug=&cols=&rows=[&terminal=]`
 * upgraded to a WebSocket by the server `npm start` and `npm run dev` build (scripts/berth-process.ts;
 * Next's own servers serve no application upgrades).
 * Everything is checked BEFORE the upgrade, answered as a plain HTTP error otherwise: the Origin (a
 * cookie-authenticated upgrade from another site is refused: WebSockets have no CORS), the session cookie
 * or API key, the tenant, the role and the workspace (server/modules/terminal/terminal.service.ts).
 *
 * Protocol: server → client binary frames are terminal output; text frames are JSON control messages
 * (`ready`, `exit`, `error`). Client → server text frames are JSON: `input`, `resize`, `close` (the
 * goodbye of a closed tab: the shell ends at once). A connection that drops without one, or stops answering
 * pings, detaches: the shell waits for a reattach (`terminal=<id>`) during the grace period. The reattach
 * may reach any replica: one that does not own the shell relays it to the owner (terminal-relay.ts).
 */
const TERMINAL_PATH = /^\/api\/workspaces\/([^/]+)\/terminal$/;
const PING_INTERVAL_MS = 15_000;
const MAX_MESSAGE_BYTES = 64 * 1024;

const ZSize = z.coerce.number().int().min(1).max(1000);
const ZQuery = z.object({
  tenantSlug: z.string().min(1).max(200),
  cols: ZSize.default(80),
  rows: ZSize.refine((rows) => rows <= 500).default(24),
  terminal: z.uuid().optional(),
});
const ZClientMessage = z.discriminatedUnion("type", [
  z.object({ type: z.literal("input"), data: z.string().max(MAX_MESSAGE_BYTES) }),
  z.object({ type: z.literal("resize"), cols: ZSize, rows: ZSize.refine((rows) => rows <= 500) }),
  z.object({ type: z.literal("close") }),
]);

function headersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}

/** An HTTP answer on the raw socket, for a refusal before the upgrade (the client sees the status). */
function refuse(berth: Berth, socket: Duplex, error: unknown): void {
  const { status, body } = toRouteError(error);
  if (status >= 500) berth.api.logger.error({ err: error }, "terminal upgrade failed");
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\n` +
      "Content-Type: application/json\r\nCache-Control: no-store\r\nConnection: close\r\n" +
      `Content-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
}

/**
 * Serves terminal upgrades on `server`. Every other upgrade is refused (in production there is nothing
 * else to upgrade to) unless `othersBelongToNext`: Next's development server adds its own upgrade
 * listener to the same server on its first request (its hot reload), and must be left those.
 */
export function serveTerminalUpgrades(
  berth: Berth,
  server: Server,
  options: {
    othersBelongToNext?: boolean;
  } = {},
): void {
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES * 2 });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://berth.invalid");
    const match = TERMINAL_PATH.exec(url.pathname);
    if (!match && options.othersBelongToNext) return;
    socket.on("error", () => socket.destroy());
    if (!match) {
      refuse(berth, socket, new AppError("NOT_FOUND", `no upgrade at ${url.pathname}`));
      return;
    }
    const headers = headersOf(req);
    void runWithRequestMeta(requestMetaOf(headers), () =>
      accept(berth, sockets, req, socket, head, headers, decodeURIComponent(match[1]!), url).catch(
        (error: unknown) => refuse(berth, socket, error),
      ),
    );
  });
}

async function accept(
  berth: Berth,
  sockets: WebSocketServer,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  headers: Headers,
  workspaceId: string,
  url: URL,
): Promise<void> {
  assertSameOriginUpgrade(headers, berth.api.origins);
  const raw = Object.fromEntries(url.searchParams);
  assertNoUnsafeStrings({ workspaceId, ...raw });
  const query = ZQuery.safeParse(raw);
  if (!query.success) {
    throw new AppError("BAD_REQUEST", `terminal query: ${query.error.message}`, {
      userMessage: "A terminal needs tenantSlug and a size of 1–1000 columns by 1–500 rows.",
    });
  }
  const principal = await resolveRequestPrincipal(berth.api.auth, headers, berth.db);
  if (!principal) throw new AppError("UNAUTHORIZED", "no credentials", { userMessage: "Sign in first." });
  const scope = await resolveTenantScope(principal, query.data.tenantSlug, berth.db);
  const { terminals } = berth.workspaces;

  // The sink exists before the socket does: output that arrives during the handshake is queued.
  let ws: WebSocket | null = null;
  const pending: Array<Buffer | string> = [];
  const send = (frame: Buffer | string) => (ws ? ws.send(frame) : pending.push(frame));
  const sink: TerminalSink = {
    output: (chunk) => send(chunk),
    exit: (exitCode) => {
      send(JSON.stringify({ type: "exit", exitCode }));
      ws?.close(1000, "exited");
    },
    // 4409: another connection took the terminal over (a client must not reattach again on its own).
    superseded: () => ws?.close(4409, "taken over"),
    // The relay to the replica that owns the shell broke: the client reattaches (and may land elsewhere).
    interrupted: () => ws?.close(1011, "relay interrupted"),
  };
  const { cols, rows, terminal } = query.data;
  const reattached = terminal !== undefined;
  const handle = reattached
    ? await terminals.reattach(scope, workspaceId, terminal, sink)
    : await terminals.open(scope, workspaceId, { cols, rows }, sink);
  if (reattached) await handle.resize(cols, rows).catch(() => undefined);
  // The client gave up while the shell was starting: nobody will ever read it.
  if (socket.destroyed) {
    await (reattached ? handle.detach() : handle.close("closed"));
    return;
  }

  sockets.handleUpgrade(req, socket, head, (connected) => {
    ws = connected;
    connected.send(JSON.stringify({ type: "ready", terminalId: handle.id, reattached }));
    for (const frame of pending.splice(0)) connected.send(frame);
    wire(connected, handle);
  });
}

function wire(ws: WebSocket, handle: TerminalHandle): void {
  let alive = true;
  let saidGoodbye = false;
  ws.on("pong", () => (alive = true));
  // A connection that stops answering (a laptop lid, a dead proxy) is terminated and detaches.
  const heartbeat = setInterval(() => {
    if (!alive) return ws.terminate();
    alive = false;
    ws.ping();
  }, PING_INTERVAL_MS);
  heartbeat.unref();

  ws.on("message", (data: RawData, isBinary: boolean) => {
    const parsed = isBinary ? null : ZClientMessage.safeParse(parseJsonOrNull(textOf(data)));
    if (!parsed?.success) {
      ws.send(
        JSON.stringify({ type: "error", code: "BAD_REQUEST", message: "Unreadable terminal message." }),
      );
      return;
    }
    const message = parsed.data;
    if (message.type === "input") handle.write(message.data);
    else if (message.type === "resize") void handle.resize(message.cols, message.rows).catch(() => undefined);
    else {
      saidGoodbye = true;
      void handle.close("closed").finally(() => ws.close(1000, "closed"));
    }
  });
  ws.on("close", (code: number) => {
    clearInterval(heartbeat);
    // 1000/1001 from the browser: the tab closed or navigated away. Anything else may come back.
    if (saidGoodbye || code === 1000 || code === 1001) void handle.close("closed");
    else handle.detach();
  });
  ws.on("error", () => ws.terminate());
}

function textOf(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString("utf8");
  return (Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)).toString("utf8");
}
