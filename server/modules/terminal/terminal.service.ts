import type { Db } from "@/server/db";
import { randomUUID } from "node:crypto";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { Logger } from "@/server/logger";
import { bindDeps } from "@/server/shared/bind-deps";
import type { PtyProcess } from "@/server/workspace/drivers/port";
import type { Workspace } from "@/server/workspace/workspace";
import type {
  AttachRequest,
  RelayedHandle,
  RelaySink,
  TerminalCaller,
  TerminalRelay,
} from "./terminal-relay";
import { assertMayActOnWorkspace } from "@/server/modules/workspace/workspace-access";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { getAgentOrNull } from "@/server/modules/agent/agent.data";
import type { LeaseOptions, WorkspaceService } from "@/server/modules/workspace/workspace.service";

/**
 * Dashboard terminals: an interactive shell on a READY workspace through its backend's PTY (the same
 * confinement as the agent's Bash commands). Who may open one: the rule of file edits (`session:use`, and
 * members only on their own sessions' workspaces); viewers cannot. While a terminal is open it holds a
 * workspace lease (`terminal:<id>`, renewed on a timer with a short TTL), so the sweeper never stops the
 * workspace under an admin's hands; a crashed process's lease lapses within the TTL.
 *
 * A terminal outlives a dropped connection for `reattachGraceMs` (a reload, a network blip): the client
 * reattaches with its id and gets the recent output back. A client that says goodbye (a closed tab) ends
 * it at once; an unattached one is ended when the grace runs out. Open and close are audited.
 *
 * With a `relay` (terminal-relay.ts), every terminal is announced in Redis with this process as its owner,
 * and a reattach that reaches another replica is relayed here: no sticky sessions needed.
 */
export type TerminalOptions = {
  /** Lease TTL; renewed every third of it while the terminal lives. */
  leaseTtlMs: number;
  reattachGraceMs: number;
  /** Output kept for a reattach (bytes). */
  replayBytes: number;
  /** Terminals one process keeps open at once (each is a shell and a PTY). */
  maxOpen: number;
};

const DEFAULT_TERMINAL_OPTIONS: TerminalOptions = {
  leaseTtlMs: 60_000,
  reattachGraceMs: 30_000,
  replayBytes: 64 * 1024,
  maxOpen: 64,
};

/** What a connection receives from its terminal. */
export type TerminalSink = RelaySink;

export type TerminalHandle = {
  readonly id: string;
  readonly workspaceId: string;
  write(data: string): void;
  resize(cols: number, rows: number): Promise<void>;
  /** The connection went away without a goodbye: keep the shell for the grace period. */
  detach(): void;
  /** Ends the shell (a closed tab, an explicit close). */
  close(reason: string): Promise<void>;
};

type Terminal = {
  id: string;
  scope: TenantScope;
  workspaceId: string;
  pty: PtyProcess;
  replay: Buffer[];
  replaySize: number;
  sink: TerminalSink | null;
  graceTimer: NodeJS.Timeout | null;
  closing: Promise<void> | null;
  exitCode: number | null;
  end: (reason: string) => Promise<void>;
};

/** One process' terminals: what every terminal use case shares (built once by the factory below). */
type TerminalDeps = {
  service: Pick<WorkspaceService, "engine" | "withLease" | "acquireLease">;
  /** The process' database client (the Berth root's). */
  db: Db;
  options: TerminalOptions;
  relay: TerminalRelay | undefined;
  /** The terminals open in this process, by id. */
  open: Map<string, Terminal>;
  /** Each terminal's whole life, lease release included (shutdown waits for them before the pool closes). */
  lives: Set<Promise<unknown>>;
  log: Logger;
  /** Where terminal opens are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
};

const sameCaller = (a: TerminalCaller, b: TerminalCaller) =>
  a.tenantId === b.tenantId && a.userId === b.userId && a.apiKeyId === b.apiKeyId;
const callerOf = ({ tenantId, userId, apiKeyId }: TenantScope): TerminalCaller => ({
  tenantId,
  userId,
  apiKeyId,
});
const notOpen = (terminalId: string) =>
  new AppError("NOT_FOUND", `terminal ${terminalId} is not open`, {
    userMessage: "That terminal has ended; open a new one.",
  });

function auditTerminal(
  deps: Pick<TerminalDeps, "log" | "audit">,
  scope: TenantScope,
  action: string,
  workspaceId: string,
  details: Record<string, unknown>,
) {
  return deps.audit
    .record(scope, {
      action,
      targetType: "workspace",
      targetId: workspaceId,
      outcome: "success",
      details,
    })
    .catch((error: unknown) => deps.log.error({ err: error, action }, "audit write failed"));
}

/**
 * The handle of one connection: once another connection took the terminal over (a second tab, a
 * reattach after a drop the server had not noticed yet), this one's detach and close do nothing.
 */
function connectTerminal(
  deps: Pick<TerminalDeps, "options">,
  terminal: Terminal,
  sink: TerminalSink,
): TerminalHandle & RelayedHandle {
  if (terminal.graceTimer) clearTimeout(terminal.graceTimer);
  terminal.graceTimer = null;
  const previous = terminal.sink;
  terminal.sink = sink;
  // A relayed connection may have paused the output (flow control); the new one starts it again.
  terminal.pty.output.resume();
  if (previous && previous !== sink) previous.superseded?.();
  const current = () => terminal.sink === sink;
  return {
    id: terminal.id,
    workspaceId: terminal.workspaceId,
    write: (data) => {
      if (current()) terminal.pty.write(data);
    },
    resize: async (cols, rows) => {
      if (current()) await terminal.pty.resize(cols, rows);
    },
    pause() {
      if (current()) terminal.pty.output.pause();
    },
    resume() {
      if (current()) terminal.pty.output.resume();
    },
    detach() {
      if (!current()) return;
      terminal.sink = null;
      // Detached output still goes to the replay buffer.
      terminal.pty.output.resume();
      if (terminal.closing) return;
      terminal.graceTimer = setTimeout(() => void terminal.end("detached"), deps.options.reattachGraceMs);
      terminal.graceTimer.unref();
    },
    close: async (reason) => {
      if (current()) await terminal.end(reason);
    },
  };
}

/** Binds a terminal of this process to a connection (here or relayed), the recent output first. */
function attachLocalTerminal(
  deps: Pick<TerminalDeps, "open" | "options">,
  request: AttachRequest,
  sink: TerminalSink,
) {
  const terminal = deps.open.get(request.terminalId);
  if (
    !terminal ||
    terminal.closing ||
    terminal.workspaceId !== request.workspaceId ||
    !sameCaller(callerOf(terminal.scope), request.caller)
  ) {
    throw notOpen(request.terminalId);
  }
  // A second tab taking the terminal over: the first one is told and stops receiving.
  const replay = Buffer.concat(terminal.replay);
  const handle = connectTerminal(deps, terminal, sink);
  if (replay.length > 0) sink.output(replay);
  return handle;
}

/** The caller may open a terminal here: `session:use` on a READY workspace of theirs, a PTY, room left. */
async function assertMayOpenTerminal(
  deps: Pick<TerminalDeps, "service" | "db" | "open" | "options">,
  scope: TenantScope,
  workspaceId: string,
): Promise<void> {
  const { db } = deps;
  assertCan(scope, "session:use");
  const record = await getWorkspace(scope, workspaceId, db);
  await assertMayActOnWorkspace(scope, record, db);
  if (record.state !== "READY") {
    throw new AppError("CONFLICT", `workspace ${workspaceId} is ${record.state}`, {
      userMessage: `The workspace is ${record.state.toLowerCase()}: a terminal needs a ready workspace.`,
      details: { state: record.state },
    });
  }
  if (!deps.service.engine.drivers.find(record.backendKind)?.capabilities.pty) {
    throw new AppError("UNPROCESSABLE", `backend ${record.backendKind} has no PTY`, {
      userMessage: "This workspace's backend offers no terminal.",
    });
  }
  if (deps.open.size >= deps.options.maxOpen) {
    throw new AppError("TOO_MANY_REQUESTS", "terminal limit reached", {
      userMessage: "Too many terminals are open on this server; close one and try again.",
    });
  }
}

/** Opens a shell on the workspace and connects the caller to it (its lease held until the shell ends). */
async function openTerminal(
  deps: TerminalDeps,
  scope: TenantScope,
  workspaceId: string,
  size: { cols: number; rows: number },
  sink: TerminalSink,
): Promise<TerminalHandle> {
  await assertMayOpenTerminal(deps, scope, workspaceId);
  const id = randomUUID();
  const holder = `terminal:${id}`;
  const lease = { holder, reason: "workspace.terminal", ttlMs: deps.options.leaseTtlMs };
  let started!: (terminal: Terminal) => void;
  const ready = new Promise<Terminal>((resolve) => (started = resolve));

  // The lease spans the shell's life: withLease releases it (and records the release) when it ends.
  const life = deps.service.withLease(scope, workspaceId, lease, (workspace, record) =>
    runTerminal(
      deps,
      { id, scope, workspaceId, agentId: record.agentId, lease, size, sink, started },
      workspace,
    ),
  );
  const settled = life.catch(() => undefined).finally(() => deps.lives.delete(settled));
  deps.lives.add(settled);
  const terminal = await Promise.race([ready, life.then(() => ready)]);
  life.catch((error: unknown) =>
    deps.log.warn({ err: error, workspaceId }, "a terminal ended with an error"),
  );
  await auditTerminal(deps, scope, "workspace.terminal.open", workspaceId, { terminalId: id, ...size });
  return connectTerminal(deps, terminal, sink);
}

/**
 * A terminal's life, under its lease: the shell started, its lease renewed and its owner announced while
 * it runs, its output kept for a reattach; ends when the shell exits (or is ended).
 */
async function runTerminal(
  deps: TerminalDeps,
  start: {
    id: string;
    scope: TenantScope;
    workspaceId: string;
    /** The workspace's agent: its environment variables are the shell's, as in its Bash commands. */
    agentId: string | null;
    lease: LeaseOptions;
    size: { cols: number; rows: number };
    sink: TerminalSink;
    started: (terminal: Terminal) => void;
  },
  workspace: Workspace,
): Promise<void> {
  const { db } = deps;
  const { id, scope, workspaceId, agentId, lease, size, sink, started } = start;
  const { service, options, relay, log } = deps;
  const machine = workspace.machine;
  if (!machine.openPty) throw new AppError("UNPROCESSABLE", "backend has no PTY");
  const env = agentId ? ((await getAgentOrNull(scope, agentId, db))?.env ?? {}) : {};
  const pty = await machine.openPty({ ...size, env });
  const openedAt = Date.now();
  const renew = setInterval(() => {
    service
      .acquireLease(scope, workspaceId, { ...lease, quiet: true })
      .catch((error: unknown) => log.warn({ err: error, workspaceId }, "renewing a terminal lease failed"));
    void announce();
  }, options.leaseTtlMs / 3);
  renew.unref();
  const announce = () =>
    relay
      ?.register(id, { ...callerOf(scope), workspaceId }, options.leaseTtlMs)
      .catch((error: unknown) => log.warn({ err: error, workspaceId }, "announcing a terminal failed"));
  const terminal: Terminal = {
    id,
    scope,
    workspaceId,
    pty,
    replay: [],
    replaySize: 0,
    sink,
    graceTimer: null,
    closing: null,
    exitCode: null,
    end: (reason) => {
      terminal.closing ??= (async () => {
        if (terminal.graceTimer) clearTimeout(terminal.graceTimer);
        await pty.kill().catch((error: unknown) => log.warn({ err: error }, "killing a terminal failed"));
        await auditTerminal(deps, scope, "workspace.terminal.close", workspaceId, {
          terminalId: id,
          reason,
          exitCode: terminal.exitCode,
          durationMs: Date.now() - openedAt,
        });
      })();
      return terminal.closing;
    },
  };
  pty.output.on("data", (chunk: Buffer) => {
    terminal.replay.push(chunk);
    terminal.replaySize += chunk.length;
    while (terminal.replaySize > options.replayBytes && terminal.replay.length > 1) {
      terminal.replaySize -= terminal.replay.shift()!.length;
    }
    terminal.sink?.output(chunk);
  });
  deps.open.set(id, terminal);
  // Announced before the client hears the id: a reattach through any replica finds the owner.
  await announce();
  started(terminal);
  try {
    const { exitCode } = await pty.exited;
    terminal.exitCode = exitCode;
    terminal.sink?.exit(exitCode);
    await terminal.end("exited");
  } finally {
    clearInterval(renew);
    deps.open.delete(id);
    await relay
      ?.unregister(id)
      .catch((error: unknown) => log.warn({ err: error, workspaceId }, "unannouncing a terminal failed"));
  }
}

/**
 * The caller's own terminal on this workspace, still open (in its grace period or attached
 * elsewhere): in this process, or through the relay in the process that owns it.
 */
async function reattachTerminal(
  deps: Pick<TerminalDeps, "open" | "options" | "relay">,
  scope: TenantScope,
  workspaceId: string,
  terminalId: string,
  sink: TerminalSink,
): Promise<TerminalHandle> {
  assertCan(scope, "session:use");
  const { relay } = deps;
  const request = { terminalId, workspaceId, caller: callerOf(scope) };
  if (deps.open.has(terminalId) || !relay) return attachLocalTerminal(deps, request, sink);
  const entry = await relay.lookup(terminalId);
  if (
    !entry ||
    entry.owner === relay.processId ||
    entry.workspaceId !== workspaceId ||
    !sameCaller(entry, request.caller)
  ) {
    throw notOpen(terminalId);
  }
  return { ...(await relay.attach(entry, request, sink)), id: terminalId, workspaceId };
}

/** Ends every terminal of this process (graceful shutdown). */
async function closeAllTerminals(deps: Pick<TerminalDeps, "open" | "lives" | "relay">): Promise<void> {
  await Promise.all([...deps.open.values()].map((terminal) => terminal.end("shutdown")));
  await Promise.all([...deps.lives]);
  await deps.relay?.close();
}

/** The terminals of this process: the use cases above over one set of open terminals. */
export function createWorkspaceTerminalService(
  service: WorkspaceService,
  { db, audit }: { db: Db; audit: AuditRecorder },
  overrides: Partial<TerminalOptions> = {},
  relay?: TerminalRelay,
) {
  const options: TerminalOptions = { ...DEFAULT_TERMINAL_OPTIONS, ...overrides };
  const deps: TerminalDeps = {
    service,
    db,
    options,
    relay,
    open: new Map(),
    lives: new Set(),
    log: service.engine.log.child({ component: "terminal" }),
    audit,
  };
  relay?.serve((request, sink) => attachLocalTerminal(deps, request, sink));
  const bind = bindDeps(deps);
  return {
    /** Terminals open in this process (tests, shutdown). */
    openCount: () => deps.open.size,
    open: bind(openTerminal),
    reattach: bind(reattachTerminal),
    closeAll: () => closeAllTerminals(deps),
  };
}

export type WorkspaceTerminalService = ReturnType<typeof createWorkspaceTerminalService>;
