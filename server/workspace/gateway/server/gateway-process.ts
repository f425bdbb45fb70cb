import fs from "node:fs";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { GATEWAY_ENV } from "../gateway-protocol";
import { inProcessFileService, WorkerFileService, type FileService } from "./file-worker";
import { createGatewayServer } from "./gateway-server";
import { RunAsConnector, type McpRunAs } from "./run-as";
import { ScopeRegistry } from "./scope-registry";

/**
 * Composition root of the gateway process that runs INSIDE the sandbox (bundled into one file by
 * bundle-gateway.ts and started with the sandbox's Node; gateway-main.ts picks this role). Configuration comes from the environment so the
 * token never appears in argv (visible to every user through `ps`).
 */
function readConfig(env: NodeJS.ProcessEnv) {
  const listen = env[GATEWAY_ENV.listen] ?? "tcp:127.0.0.1:5600";
  let token = env[GATEWAY_ENV.token] ?? "";
  const tokenFile = env[GATEWAY_ENV.tokenFile];
  if (!token && tokenFile) {
    token = fs.readFileSync(tokenFile, "utf8").trim();
    if (env.BERTH_GATEWAY_TOKEN_FILE_DELETE === "1") fs.rmSync(tokenFile, { force: true });
  }
  if (token.length < 16) throw new Error("the gateway needs a token of at least 16 characters");
  const nonce = env[GATEWAY_ENV.nonce] ?? "";
  if (!nonce) throw new Error(`${GATEWAY_ENV.nonce} is required`);
  const timeout = Number(env[GATEWAY_ENV.defaultCallTimeoutMs] ?? "30000");
  if (!Number.isFinite(timeout) || timeout <= 0) throw new Error("invalid default call timeout");
  const mcpUser = env[GATEWAY_ENV.mcpUser];
  let runAs: McpRunAs | null = null;
  if (mcpUser && process.getuid?.() === 0) {
    const [uid, gid] = mcpUser.split(":").map(Number);
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error(`invalid ${GATEWAY_ENV.mcpUser}`);
    runAs = { uid: uid!, gid: gid!, home: env[GATEWAY_ENV.mcpHome] ?? "/tmp" };
  }
  return { listen, token, nonce, timeout, runAs, workdir: env[GATEWAY_ENV.workdir] ?? process.cwd() };
}

export function runGateway(): void {
  const config = readConfig(process.env);
  // Scrub secrets so stdio MCP servers (which inherit a filtered env anyway) can never see them.
  delete process.env[GATEWAY_ENV.token];
  const local = new LocalMcpConnector({
    // The host validates every answer at the gateway protocol boundary; the SDK checking it here too
    // only adds to each call (tool-call-relay.ts).
    relayToolCalls: true,
    defaultCallTimeoutMs: config.timeout,
    defaultCwd: config.workdir,
    clientInfo: { name: "berth-gateway", version: "1" },
    logger: { warn: (fields, message) => console.error(`[gateway] ${message} ${JSON.stringify(fields)}`) },
  });
  const registry = new ScopeRegistry(config.runAs ? new RunAsConnector(local, config.runAs) : local);
  let files: FileService = inProcessFileService;
  if (config.runAs) {
    // As root, file operations run in a child with the workspace user's uid (see file-worker.ts), never here.
    const entry = process.argv[1] ?? "";
    const worker = new WorkerFileService({ ...config.runAs, workdir: config.workdir, entry });
    worker.warmUp();
    files = worker;
  }
  const ownPort = config.listen.startsWith("tcp:")
    ? Number(config.listen.slice(config.listen.lastIndexOf(":") + 1))
    : null;
  const server = createGatewayServer({
    token: config.token,
    instanceNonce: config.nonce,
    registry,
    files,
    tunnelRefusedPorts: ownPort === null ? [] : [ownPort],
  });
  // Tool calls may legitimately run for minutes; the host's per-call timeout is the real bound.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;

  let listen: () => void;
  if (config.listen.startsWith("unix:")) {
    const socketPath = config.listen.slice("unix:".length);
    listen = () => {
      fs.rmSync(socketPath, { force: true }); // a stale socket from a previous instance would make listen fail
      server.listen(socketPath);
    };
    // The host may run as another user than the gateway; the token, not the file mode, is the guard.
    server.once("listening", () => fs.chmodSync(socketPath, 0o666));
  } else if (config.listen.startsWith("tcp:")) {
    const address = config.listen.slice("tcp:".length);
    const colon = address.lastIndexOf(":");
    listen = () => server.listen(Number(address.slice(colon + 1)), address.slice(0, colon));
  } else {
    throw new Error(`unsupported listen address ${config.listen}`);
  }
  server.once("listening", () =>
    console.error(`[gateway] listening on ${config.listen} (pid ${process.pid})`),
  );
  // The previous gateway on a fixed port (E2B, Kubernetes) is stopped just before this one starts, and a
  // process killed under load can hold its socket a moment longer: a busy address is tried again for a
  // while instead of crashing a start the host then waits out. Any other error ends the process, saying why.
  let busyTries = 0;
  let stopping = false;
  server.on("error", (error: NodeJS.ErrnoException) => {
    if (server.listening) return console.error(`[gateway] server error: ${error.message}`);
    if (error.code === "EADDRINUSE" && busyTries++ < LISTEN_BUSY_TRIES) {
      if (busyTries === 1) console.error(`[gateway] ${config.listen} is busy; trying again`);
      setTimeout(() => stopping || listen(), LISTEN_BUSY_DELAY_MS);
      return;
    }
    console.error(`[gateway] cannot listen on ${config.listen}: ${error.message}`);
    process.exit(1);
  });
  listen();

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.error(`[gateway] ${signal}: closing upstream sessions`);
    server.close();
    files.close();
    void registry.closeAll().finally(() => process.exit(0));
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("unhandledRejection", (reason) => console.error(`[gateway] unhandled: ${errorMessage(reason)}`));
}

const LISTEN_BUSY_TRIES = 50;
const LISTEN_BUSY_DELAY_MS = 100;

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
