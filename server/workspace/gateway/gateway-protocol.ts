import { z } from "zod";
import type { McpScope } from "@/server/workspace/mcp/types";

/**
 * The wire protocol of the in-sandbox MCP gateway, shared by the server (bundled into the sandbox) and the
 * host client so both sides validate the same shapes. Endpoints follow the reference (agentscope-spec.md
 * §7.3): every route but /health takes `agent_id` and `session_id` query parameters (default ""), and
 * errors are `{"detail": "..."}` with the reference's status codes. Differences, on purpose:
 * - EVERY route, /health included, needs `Authorization: Bearer <token>`; there is no auth-less mode.
 * - MCP and tool names are URL-encoded path segments (the reference formatted them in raw).
 * - A tool call may carry `timeout_ms`; the gateway's default is configurable (the reference capped 30 s).
 * - Bodies are MCP's own shapes (Tool, CallToolResult) instead of the reference's Python dumps.
 */

/**
 * 2: adds the `/files/*` endpoints (workspace file operations, see ZGatewayFileOp). A host must not call them
 * on a gateway that reports an older protocol: an old gateway answers them 404, which reads like a missing file.
 * 3: adds the channel (channel-framing.ts); hosts find out by asking for it, an older gateway refuses.
 * 4: adds the TCP tunnel (TUNNEL_PATH below: preview URLs). A host checks `protocol` first: an older gateway
 * answers the upgrade 404, which would read like "nothing listens on that port".
 */
export const GATEWAY_PROTOCOL_VERSION = 4;
/** The first protocol with the TCP tunnel. */
export const GATEWAY_TUNNEL_PROTOCOL = 4;
/** The first protocol with the file endpoints. */
export const GATEWAY_FILES_PROTOCOL = 2;

export const ZGatewayHealth = z.object({
  status: z.literal("ok"),
  instance_nonce: z.string(),
  protocol: z.number().int(),
  pid: z.number().int(),
});
export type TGatewayHealth = z.infer<typeof ZGatewayHealth>;

const ZGatewayToolInfo = z.object({
  name: z.string(),
  description: z.string().default(""),
  inputSchema: z.record(z.string(), z.unknown()),
  annotations: z
    .object({ readOnlyHint: z.boolean().optional(), destructiveHint: z.boolean().optional() })
    .loose()
    .optional(),
});
export const ZGatewayToolList = z.array(ZGatewayToolInfo);

export const ZGatewayCallToolBody = z.object({
  arguments: z.record(z.string(), z.unknown()).default({}),
  /** Milliseconds; overrides the MCP's execution_timeout and the gateway default for this call. */
  timeout_ms: z.number().int().positive().optional(),
});

const ZGatewayToolResult = z.object({
  content: z.array(z.looseObject({ type: z.string() })),
  isError: z.boolean(),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
});
export const ZGatewayCallToolResponse = z.object({ result: ZGatewayToolResult });

export const ZGatewayOk = z.object({ ok: z.literal(true) });
/** `code` is the AppError code behind the failure, so the host raises the same error a local client would. */
export const ZGatewayErrorBody = z.object({
  detail: z.string(),
  code: z.string().optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type TGatewayErrorBody = z.infer<typeof ZGatewayErrorBody>;
/**
 * `details.reason` of the NOT_FOUND a gateway answers for an MCP name it has no registration for (as
 * opposed to an unknown tool): the host may register the declaration again and repeat the request.
 */
export const MCP_NOT_REGISTERED = "mcp_not_registered";

/** Query string carrying the scope; ids go in the query, never in the path (as in the reference). */
function scopeQuery(scope: McpScope): string {
  return new URLSearchParams({ agent_id: scope.agentId, session_id: scope.sessionId }).toString();
}

export const gatewayPaths = {
  health: () => "/health",
  mcps: (scope: McpScope) => `/mcps?${scopeQuery(scope)}`,
  mcp: (name: string, scope: McpScope) => `/mcps/${encodeURIComponent(name)}?${scopeQuery(scope)}`,
  tools: (name: string, scope: McpScope) => `/mcps/${encodeURIComponent(name)}/tools?${scopeQuery(scope)}`,
  tool: (name: string, tool: string, scope: McpScope) =>
    `/mcps/${encodeURIComponent(name)}/tools/${encodeURIComponent(tool)}?${scopeQuery(scope)}`,
};

/**
 * File endpoints (protocol ≥ 2). Paths are absolute paths inside the sandbox, passed as query parameters;
 * operations run as the workspace user and raise the errors the backend port documents (the error body's
 * `code` is the AppError code). `read` answers with the raw bytes (200) and `write` takes them as the
 * request body, sent only after `Expect: 100-continue` was answered, so a refused write consumes nothing.
 */
export const ZGatewayFileOp = z.enum([
  "read",
  "write",
  "stat",
  "list",
  "mkdir",
  "remove",
  "move",
  "realpath",
]);
export type TGatewayFileOp = z.infer<typeof ZGatewayFileOp>;
export const FILE_OP_METHODS: Record<TGatewayFileOp, "GET" | "POST" | "PUT"> = {
  read: "GET",
  write: "PUT",
  stat: "GET",
  list: "GET",
  mkdir: "POST",
  remove: "POST",
  move: "POST",
  realpath: "GET",
};
export const ZGatewayWriteMode = z.enum(["replace", "append", "exclusive"]);

const ZFileType = z.enum(["file", "directory", "symlink", "other"]);
const ZGatewayFileStat = z.object({
  type: ZFileType,
  size: z.number(),
  mtimeMs: z.number(),
  mode: z.number().int(),
});
export const ZGatewayStatResponse = z.object({ stat: ZGatewayFileStat.nullable() });
export const ZGatewayListResponse = z.object({
  entries: z.array(
    z.object({
      name: z.string(),
      type: ZFileType,
      size: z.number().nullable(),
      mtimeMs: z.number().nullable(),
    }),
  ),
});
export const ZGatewayRealpathResponse = z.object({ path: z.string().nullable() });
/** Set in an error body's `details` when the file service itself (not the file) is unavailable. */
export const FILE_SERVICE_DOWN = "fileServiceDown";

export function fileOpPath(op: TGatewayFileOp, params: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.set(key, String(value));
  return `/files/${op}?${query.toString()}`;
}

/** Environment variables the gateway reads at start (its composition root is gateway-main.ts). */
export const GATEWAY_ENV = {
  /** `unix:/abs/path.sock` or `tcp:127.0.0.1:5600`. */
  listen: "BERTH_GATEWAY_LISTEN",
  token: "BERTH_GATEWAY_TOKEN",
  /** Alternative to `token`: a file holding it (read, then deleted when BERTH_GATEWAY_TOKEN_FILE_DELETE=1). */
  tokenFile: "BERTH_GATEWAY_TOKEN_FILE",
  nonce: "BERTH_GATEWAY_NONCE",
  defaultCallTimeoutMs: "BERTH_GATEWAY_CALL_TIMEOUT_MS",
  /** `uid:gid` the stdio MCP servers run as when the gateway itself runs as root. */
  mcpUser: "BERTH_GATEWAY_MCP_USER",
  mcpHome: "BERTH_GATEWAY_MCP_HOME",
  /** Default cwd of stdio MCP servers. */
  workdir: "BERTH_GATEWAY_WORKDIR",
  /** "files" in the unprivileged child that serves the file endpoints (see file-worker.ts). */
  role: "BERTH_GATEWAY_ROLE",
} as const;

/**
 * The TCP tunnel (protocol ≥ 4): `GET /tunnel?port=N` with `Upgrade: berth-gateway-tcp` and the bearer
 * token. The gateway connects to 127.0.0.1:N inside the machine FIRST and answers `101` only once that
 * connection stands, so a host learns "nothing listens" as an HTTP answer (502, the usual error body with
 * `details.reason: "port_not_listening"`), never as a tunnel that closes at once. After the 101 the
 * connection carries the raw bytes both ways; either side's FIN is passed on (half-close).
 */
export const TUNNEL_PATH = "/tunnel";
export const TUNNEL_PROTOCOL = "berth-gateway-tcp";
/** Ports below are privileged (system services); a preview is an unprivileged app's. */
export const MIN_TUNNEL_PORT = 1024;
export const MAX_TUNNEL_PORT = 65535;
export const PORT_NOT_LISTENING = "port_not_listening";
export function tunnelPath(port: number): string {
  return `${TUNNEL_PATH}?port=${port}`;
}
