import { fork, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { FILE_SERVICE_DOWN, GATEWAY_ENV } from "../gateway-protocol";
import { handleFileRequest } from "./file-ops";
import { expectsContinue, sendError } from "./http-util";

/** Serves the authenticated `/files/*` requests the gateway hands over. */
export interface FileService {
  handle(req: http.IncomingMessage, res: http.ServerResponse): void;
  close(): void;
}

/** The gateway serves file requests itself: it already runs as the workspace user (or in a test). */
export const inProcessFileService: FileService = {
  handle: (req, res) => void handleFileRequest(req, res),
  close: () => undefined,
};

export type FileWorkerOptions = {
  uid: number;
  gid: number;
  home: string;
  workdir: string;
  /** The gateway bundle: the worker is the same file started with BERTH_GATEWAY_ROLE=files. */
  entry: string;
  startTimeoutMs?: number;
};

const ZReady = z.object({ ready: z.literal(true), socketPath: z.string().min(1) });
/** After a failed start, answer "down" (the host falls back to exec) instead of forking on every request. */
const RESTART_BACKOFF_MS = 1_000;

/**
 * The gateway runs as root (so the agent cannot read its token), but file operations must run as the
 * workspace user, exactly like the exec path: permissions apply (a root writer could be talked into
 * replacing /opt/berth/berth-gateway.cjs through a symlink race), and new files belong to uid 1000.
 * Switching the gateway's euid per request is unsafe in a threaded process, so one long-lived child runs
 * as that user (fork with uid/gid: setgroups(0), setgid, setuid, no capabilities) and serves the file
 * endpoints on a unix socket of its own; the gateway checks the token and proxies, streams piped both ways.
 *
 * The child holds no secret: its environment is rebuilt from scratch, so an agent that reaches it (same
 * uid) gains nothing it could not do with its own shell. If the agent kills it, the next request starts
 * another one.
 */
export class WorkerFileService implements FileService {
  private current: { child: ChildProcess; socketPath: string } | null = null;
  private starting: Promise<string> | null = null;
  private failedAt = 0;
  private closed = false;

  constructor(private readonly options: FileWorkerOptions) {}

  /** Starts the worker ahead of the first request (its Node start-up would otherwise delay that one). */
  warmUp(): void {
    this.socketPath().catch((error: unknown) => console.error(`[gateway] file worker: ${String(error)}`));
  }

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const attempt = (retried: boolean) => {
      this.socketPath().then(
        (socketPath) =>
          proxy(req, res, socketPath, () => {
            // The worker died since it started (e.g. killed by the agent): a fresh one gets one try.
            this.forget(socketPath);
            if (retried) refuse(req, res, "the file worker is not reachable");
            else attempt(true);
          }),
        (error: unknown) => refuse(req, res, error instanceof Error ? error.message : String(error)),
      );
    };
    attempt(false);
  }

  close(): void {
    this.closed = true;
    this.current?.child.kill("SIGTERM");
    this.current = null;
  }

  private socketPath(): Promise<string> {
    if (this.current) return Promise.resolve(this.current.socketPath);
    if (this.closed) return Promise.reject(new Error("the gateway is stopping"));
    if (Date.now() - this.failedAt < RESTART_BACKOFF_MS) {
      return Promise.reject(new Error("the file worker failed to start moments ago"));
    }
    this.starting ??= this.spawn().then(
      (socketPath) => {
        this.starting = null;
        return socketPath;
      },
      (error: unknown) => {
        this.starting = null;
        this.failedAt = Date.now();
        throw error;
      },
    );
    return this.starting;
  }

  private forget(socketPath: string): void {
    if (this.current?.socketPath !== socketPath) return;
    this.current.child.kill("SIGKILL");
    this.current = null;
  }

  private spawn(): Promise<string> {
    const { uid, gid, home, workdir, entry } = this.options;
    // From scratch: nothing of the gateway's environment (its token above all) reaches the worker.
    const env: Record<string, string> = {
      PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: home,
      LANG: "C.UTF-8",
      [GATEWAY_ENV.role]: "files",
    };
    const child = fork(entry, [], {
      uid,
      gid,
      cwd: workdir,
      env: env as NodeJS.ProcessEnv,
      execArgv: [],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error("the file worker did not start in time"));
      }, this.options.startTimeoutMs ?? 15_000);
      child.once("message", (message) => {
        clearTimeout(timer);
        const ready = ZReady.safeParse(message);
        if (!ready.success) {
          child.kill("SIGKILL");
          reject(new Error("the file worker sent an unexpected message"));
          return;
        }
        this.current = { child, socketPath: ready.data.socketPath };
        resolve(ready.data.socketPath);
      });
      child.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        if (this.current?.child === child) this.current = null;
        reject(new Error(`the file worker exited (${signal ?? code})`));
      });
    });
  }
}

/** 503 with the marker the host reads as "use your fallback": no byte of the request was consumed. */
function refuse(req: http.IncomingMessage, res: http.ServerResponse, reason: string): void {
  req.resume();
  sendError(
    res,
    new AppError("UNAVAILABLE", `file service unavailable: ${reason}`, {
      details: { [FILE_SERVICE_DOWN]: true },
    }),
  );
}

/**
 * Forwards one request to the worker. A write's body moves only after the WORKER answered 100-continue
 * (it has opened the file by then), so a refused write consumes nothing; bodies and answers are piped,
 * so the slowest side sets the pace. `onUnreachable` runs when the worker could not be reached before
 * anything was forwarded (safe to retry).
 */
function proxy(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  socketPath: string,
  onUnreachable: () => void,
): void {
  const hasBody = req.method === "PUT";
  const waitsForContinue = hasBody && expectsContinue(req);
  const upstream = http.request({
    socketPath,
    method: req.method,
    path: req.url,
    headers: {
      ...(req.headers["content-type"] ? { "content-type": req.headers["content-type"] } : {}),
      ...(req.headers["content-length"] ? { "content-length": req.headers["content-length"] } : {}),
      ...(hasBody && !req.headers["content-length"] ? { "transfer-encoding": "chunked" } : {}),
      ...(waitsForContinue ? { expect: "100-continue" } : {}),
    },
    agent: false,
  });
  let forwarded = false;
  let answered = false;
  const forward = () => {
    if (forwarded) return;
    forwarded = true;
    if (waitsForContinue) res.writeContinue();
    req.pipe(upstream);
  };
  if (!hasBody) {
    forwarded = true;
    req.resume();
    upstream.end();
  } else if (waitsForContinue) {
    upstream.on("continue", forward);
    upstream.flushHeaders();
  } else {
    forward();
  }
  upstream.on("response", (answer) => {
    answered = true;
    const headers: http.OutgoingHttpHeaders = {};
    if (answer.headers["content-type"]) headers["content-type"] = answer.headers["content-type"];
    if (answer.headers["content-length"]) headers["content-length"] = answer.headers["content-length"];
    res.writeHead(answer.statusCode ?? 500, headers);
    answer.pipe(res);
    answer.on("aborted", () => res.destroy());
    answer.on("error", () => res.destroy());
  });
  upstream.on("error", (error: NodeJS.ErrnoException) => {
    if (answered || (hasBody && forwarded)) {
      // Part of the answer or of the body already moved: only cutting the connection is honest.
      res.destroy();
      return;
    }
    const code = error.code ?? "";
    if (code === "ENOENT" || code === "ECONNREFUSED") onUnreachable();
    else refuse(req, res, error.message);
  });
  // The host went away: stop the worker's side too (it removes a half-written temp file).
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
}

/**
 * The worker's main (the same bundle, BERTH_GATEWAY_ROLE=files): listens on a socket in a fresh 0700 dir
 * of its own and reports the path over the IPC channel; exits when the gateway goes away.
 */
export function runFileWorker(): void {
  const send = process.send?.bind(process);
  if (!send) throw new Error("the file worker must be started by the gateway (no IPC channel)");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "berth-files-"));
  const socketPath = path.join(dir, "files.sock");
  const server = http.createServer((req, res) => void handleFileRequest(req, res));
  server.on("checkContinue", (req, res) => void handleFileRequest(req, res));
  server.requestTimeout = 0;
  const cleanup = () => fs.rmSync(dir, { recursive: true, force: true });
  server.listen(socketPath, () => send({ ready: true, socketPath }));
  process.on("disconnect", () => {
    cleanup();
    process.exit(0);
  });
  process.on("SIGTERM", () => {
    cleanup();
    process.exit(0);
  });
}
